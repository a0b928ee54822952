// Columns over buffers made elsewhere: what the constructor accepts and every check it makes.
#include "column_test_support.hpp"

#include <gpumem/column/column.hpp>
#include <gpumem/column/null_mask.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace gpumem {
namespace {

TEST(column_construction, over_existing_buffers) {
  std::vector<std::int32_t> const values{10, 20, 30, 40};
  buffer data = buffer::from_host(values.data(), values.size() * sizeof(std::int32_t));
  column const plain(type_id::int32, 4, data);
  EXPECT_EQ(plain.to_host<std::int32_t>(),
            (std::vector<std::optional<std::int32_t>>{10, 20, 30, 40}));
  column const fewer(type_id::int32, 2, data);  // a larger buffer than the rows need is fine
  EXPECT_EQ(fewer.to_host<std::int32_t>(), (std::vector<std::optional<std::int32_t>>{10, 20}));
  column const masked(type_id::int32, 4, data, null_mask_from_host({true, false, false, true}));
  EXPECT_EQ(masked.null_count(), 2u);  // counted from the mask
  EXPECT_EQ(masked.to_host<std::int32_t>(),
            (std::vector<std::optional<std::int32_t>>{10, std::nullopt, std::nullopt, 40}));
  column const trusted(type_id::int32, 4, data, null_mask_from_host({true, false, false, true}), 2);
  EXPECT_EQ(trusted.null_count(), 2u);
  column const as_bytes(type_id::uint8, 16, data);  // the same memory seen as bytes
  EXPECT_EQ(as_bytes.to_host<std::uint8_t>()[4], 20);
}

TEST(column_construction, every_check_names_its_values) {
  buffer const data(16);
  test::expect_logic_error([&] { column(type_id::int64, 3, data); },
                           "column: the data buffer has 16 bytes, 3 elements of 8 bytes need 24");
  std::size_t const huge = std::numeric_limits<std::size_t>::max() / 2;
  test::expect_logic_error([&] { column(type_id::int32, huge, data); },
                           std::to_string(huge) + " data elements of 4 bytes exceed the address");
  test::expect_logic_error([&] { column(type_id::int32, 2, data.slice(2, 8)); },
                           "is not aligned to 4 bytes");
  test::expect_logic_error([&] { column(type_id::string, 0, data); },
                           "column: string columns are made by make_strings_column");
  buffer const mask = null_mask_from_host(std::vector<bool>(33, true));  // 64 bytes
  test::expect_logic_error([&] { column(type_id::int8, 16, data, mask, 17); },
                           "column: null_count 17 is above the 16 rows");
  test::expect_logic_error([&] { column(type_id::int8, 16, data, buffer(), 1); },
                           "column: null_count 1 without a null mask");
  test::expect_logic_error([&] { column(type_id::int8, 16, buffer(16), buffer(2)); },
                           "column: the null mask has 2 bytes, 16 rows need 4");
  test::expect_logic_error([&] { column(type_id::int8, 16, data, mask.slice(1, 8)); },
                           "the null mask buffer at address");
}

}  // namespace
}  // namespace gpumem
