// Element types and validity bitmasks: widths and names, the Arrow bit order, the 64-byte
// padding, and counting set bits against a model on random masks.
#include "column_test_support.hpp"

#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/data_type.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace gpumem {
namespace {

TEST(data_type, widths_and_names) {
  EXPECT_EQ(size_of(type_id::int8), 1u);
  EXPECT_EQ(size_of(type_id::uint16), 2u);
  EXPECT_EQ(size_of(type_id::int32), 4u);
  EXPECT_EQ(size_of(type_id::float32), 4u);
  EXPECT_EQ(size_of(type_id::uint64), 8u);
  EXPECT_EQ(size_of(type_id::float64), 8u);
  EXPECT_EQ(size_of(type_id::bool8), 1u);
  EXPECT_FALSE(is_fixed_width(type_id::string));
  EXPECT_TRUE(is_fixed_width(type_id::bool8));
  test::expect_logic_error([] { size_of(type_id::string); },
                           "size_of: string is not a fixed-width type");
  EXPECT_STREQ(to_string(type_id::uint32), "uint32");
  EXPECT_EQ(to_string(data_type(type_id::float64)), "float64");
  static_assert(type_to_id<std::int16_t>() == type_id::int16);
  static_assert(type_to_id<double>() == type_id::float64);
  static_assert(type_to_id<bool>() == type_id::bool8);
  static_assert(type_to_id<std::uint8_t>() == type_id::uint8);
  EXPECT_EQ(data_type(type_id::int32), type_id::int32);
  EXPECT_NE(data_type(type_id::int32), type_id::uint32);
}

// A type_id cast from a bad integer used to be called "unknown" (not naming the value), and the
// column constructor told the caller to make such a column with make_strings_column.
TEST(data_type, a_bad_type_id_is_named_by_its_number) {
  auto const bad = static_cast<type_id>(42);
  EXPECT_EQ(to_string(data_type(bad)), "unknown type_id 42");
  test::expect_logic_error([&] { size_of(bad); }, "size_of: unknown type_id 42 is not");
  test::expect_logic_error([&] { column(bad, 0, buffer()); },
                           "column: unknown type_id 42 is not a column element type");
  test::expect_logic_error([] { column(type_id::string, 0, buffer()); },
                           "column: string columns are made by make_strings_column");
}

TEST(bitmask, arrow_bit_order_in_bytes) {
  std::vector<bitmask_word> mask(bitmask_allocation_bytes(20) / sizeof(bitmask_word), 0);
  set_bit(mask.data(), 0);
  set_bit(mask.data(), 7);
  set_bit(mask.data(), 9);
  set_bit(mask.data(), 19);
  unsigned char bytes[3];
  std::memcpy(bytes, mask.data(), sizeof bytes);
  EXPECT_EQ(bytes[0], 0x81);  // rows 0 and 7: bits 0 and 7 of byte 0
  EXPECT_EQ(bytes[1], 0x02);  // row 9: bit 1 of byte 1
  EXPECT_EQ(bytes[2], 0x08);  // row 19: bit 3 of byte 2
  EXPECT_TRUE(bit_is_set(mask.data(), 9));
  clear_bit(mask.data(), 9);
  EXPECT_FALSE(bit_is_set(mask.data(), 9));
  EXPECT_TRUE(bit_is_set(mask.data(), 7));
}

TEST(bitmask, allocation_is_padded_to_64_bytes) {
  EXPECT_EQ(bitmask_allocation_bytes(0), 0u);
  EXPECT_EQ(bitmask_allocation_bytes(1), 64u);
  EXPECT_EQ(bitmask_allocation_bytes(512), 64u);
  EXPECT_EQ(bitmask_allocation_bytes(513), 128u);
  EXPECT_EQ(bitmask_allocation_bytes(1000), 128u);  // the spec's 1000 int32 rows: 128 bytes
  EXPECT_EQ(bitmask_words(33), 2u);
  std::size_t const max = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(bitmask_words(max), max / 32 + 1);
  EXPECT_EQ(bitmask_allocation_bytes(max) % 64, 0u);
  EXPECT_GE(bitmask_allocation_bytes(max), max / 8);
}

TEST(bitmask, count_set_bits_matches_a_model) {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::size_t const bits = 1 + rng() % 300;
    std::vector<bitmask_word> mask(bitmask_words(bits));
    std::vector<bool> model(bits);
    for (std::size_t i = 0; i < bits; ++i) {
      if (rng() % 3 != 0) continue;
      set_bit(mask.data(), i);
      model[i] = true;
    }
    std::size_t const begin = rng() % (bits + 1);
    std::size_t const end = begin + rng() % (bits - begin + 1);
    std::size_t expected = 0;
    for (std::size_t i = begin; i < end; ++i)
      expected += model[i] ? 1 : 0;
    ASSERT_EQ(count_set_bits(mask.data(), begin, end), expected)
        << "bits " << bits << " [" << begin << ", " << end << ")";
  }
  bitmask_word const full[2] = {~0u, ~0u};
  EXPECT_EQ(count_set_bits(full, 0, 64), 64u);
  EXPECT_EQ(count_set_bits(full, 31, 33), 2u);
  EXPECT_EQ(count_set_bits(full, 5, 5), 0u);
  EXPECT_EQ(count_set_bits(full, 9, 3), 0u);
}

}  // namespace
}  // namespace gpumem
