// Strings columns from and to host strings: nulls, empty strings, multi-byte characters, slices
// (whose first offset is above 0: the offsets are not rebased), the int64 offset path and its
// threshold.
#include "column_test_support.hpp"

#include <gpumem/column/detail/strings_column.hpp>
#include <gpumem/column/strings_column.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace gpumem {
namespace {

using rows_type = std::vector<std::optional<std::string>>;

TEST(strings_column, layout_of_the_spec_example) {
  column const c =
      strings_column_from_host(std::vector<std::string>{"do", "you", "have", "any", "cheese?"});
  EXPECT_EQ(c.type(), type_id::string);
  EXPECT_EQ(c.size(), 5u);
  EXPECT_FALSE(c.nullable());
  ASSERT_EQ(c.children().size(), 1u);
  column const& offsets = c.child(0);
  EXPECT_EQ(offsets.type(), type_id::int32);
  EXPECT_EQ(offsets.size(), 6u);
  EXPECT_EQ(offsets.to_host<std::int32_t>(),
            (std::vector<std::optional<std::int32_t>>{0, 2, 5, 9, 12, 19}));
  auto const chars = c.data().to_host();
  EXPECT_EQ(std::string(reinterpret_cast<char const*>(chars.data()), chars.size()),
            "doyouhaveanycheese?");
}

TEST(strings_column, round_trip_with_nulls_and_empty_strings) {
  rows_type const rows{"do", std::nullopt, "", "caf\xc3\xa9", std::nullopt, "\xf0\x9f\x99\x82 ok"};
  column const c = strings_column_from_host(rows);
  EXPECT_TRUE(c.nullable());
  EXPECT_EQ(c.null_count(), 2u);
  EXPECT_EQ(c.to_host_strings(), rows);
  auto const random = test::random_strings(500, 12, 0.2, 7);
  EXPECT_EQ(strings_column_from_host(random).to_host_strings(), random);
}

TEST(strings_column, slices_keep_the_offsets_and_read_the_right_characters) {
  auto const rows = test::random_strings(200, 9, 0.25, 8);
  column const c = strings_column_from_host(rows);
  column const a = c.slice(11, 190);
  column const b = a.slice(5, 101);  // rows [16, 112) of c
  EXPECT_EQ(b.offset(), 16u);
  EXPECT_EQ(b.child(0).size(), 201u);  // the offsets child is shared, not rebased
  EXPECT_TRUE(b.child(0).data().owns_same_memory(c.child(0).data()));
  EXPECT_EQ(b.to_host_strings(), rows_type(rows.begin() + 16, rows.begin() + 112));
  EXPECT_EQ(b.null_count(), test::model_nulls(rows, 16, 112));
  EXPECT_EQ(c.slice(199, 200).to_host_strings(), rows_type{rows[199]});
  EXPECT_TRUE(c.slice(50, 50).to_host_strings().empty());
}

TEST(strings_column, empty_and_all_null_columns) {
  column const e = strings_column_from_host(rows_type{});
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.child(0).size(), 1u);  // one offset, 0
  EXPECT_TRUE(e.to_host_strings().empty());
  EXPECT_FALSE(e.nullable());
  rows_type const nulls(70);
  column const n = strings_column_from_host(nulls);
  EXPECT_EQ(n.null_count(), 70u);
  EXPECT_EQ(n.data().size(), 0u);
  EXPECT_EQ(n.to_host_strings(), nulls);
  EXPECT_EQ(n.slice(9, 40).null_count(), 31u);
  rows_type const blanks(5, std::string());
  EXPECT_EQ(strings_column_from_host(blanks).to_host_strings(), blanks);
}

// The int64 path with a lowered threshold: the real one is max_int32_offset_bytes (2^31 - 1
// characters), which would take a 2 GiB test.
TEST(strings_column, offsets_become_int64_past_the_threshold) {
  static_assert(max_int32_offset_bytes == 2147483647u);
  rows_type const rows{"0123456789", std::nullopt, "abcde", "xyz"};  // 18 characters
  column const at = detail::strings_column_from_host(rows, buffer_memory::device, 18);
  EXPECT_EQ(at.child(0).type(), type_id::int32);
  column const past = detail::strings_column_from_host(rows, buffer_memory::device, 17);
  EXPECT_EQ(past.child(0).type(), type_id::int64);
  EXPECT_EQ(past.child(0).data().size(), 5 * sizeof(std::int64_t));
  EXPECT_EQ(past.child(0).to_host<std::int64_t>(),
            (std::vector<std::optional<std::int64_t>>{0, 10, 10, 15, 18}));
  EXPECT_EQ(past.to_host_strings(), rows);
  EXPECT_EQ(past.slice(2, 4).to_host_strings(), rows_type(rows.begin() + 2, rows.end()));
  EXPECT_EQ(detail::strings_offset_type(max_int32_offset_bytes, max_int32_offset_bytes),
            type_id::int32);
  EXPECT_EQ(detail::strings_offset_type(max_int32_offset_bytes + 1, max_int32_offset_bytes),
            type_id::int64);
  // A threshold above what int32 holds is clamped: int32 offsets never wrap.
  EXPECT_EQ(detail::strings_offset_type(max_int32_offset_bytes + 1, ~std::size_t{0}),
            type_id::int64);
}

TEST(strings_column, columns_in_managed_memory) {
  auto const rows = test::random_strings(40, 6, 0.3, 9);
  column const c = strings_column_from_host(rows, buffer_memory::managed);
  EXPECT_EQ(c.data().memory(), buffer_memory::managed);
  EXPECT_EQ(c.child(0).data().memory(), buffer_memory::managed);
  EXPECT_EQ(c.slice(3, 30).to_host_strings(), rows_type(rows.begin() + 3, rows.begin() + 30));
}

}  // namespace
}  // namespace gpumem
