#include <gpumem/core/units.hpp>

#include <gtest/gtest.h>

using gpumem::try_parse_bytes;

TEST(units, parses_plain_and_binary_suffixes) {
  EXPECT_EQ(try_parse_bytes("0"), 0u);
  EXPECT_EQ(try_parse_bytes("512"), 512u);
  EXPECT_EQ(try_parse_bytes("64KiB"), 64u * 1024);
  EXPECT_EQ(try_parse_bytes(" 3 MiB "), 3u << 20);
  EXPECT_EQ(try_parse_bytes("1.5GiB"), (3ull << 30) / 2);
  EXPECT_EQ(try_parse_bytes("2g"), 2ull << 30);
  EXPECT_EQ(try_parse_bytes("7B"), 7u);
}

TEST(units, rejects_garbage) {
  EXPECT_FALSE(try_parse_bytes(""));
  EXPECT_FALSE(try_parse_bytes("MiB"));
  EXPECT_FALSE(try_parse_bytes("12 parsecs"));
  EXPECT_FALSE(try_parse_bytes("-5"));
  EXPECT_FALSE(try_parse_bytes("99999999999999999999999"));
}

// The largest values: exact where they fit, rejected (never wrapped) where they do not.
TEST(units, sizes_near_the_top_of_size_t_parse_exactly_or_not_at_all) {
  EXPECT_EQ(try_parse_bytes("18446744073709551615"), ~std::size_t{0});
  EXPECT_FALSE(try_parse_bytes("18446744073709551616"));
  EXPECT_FALSE(try_parse_bytes("18446744073709551620"));
  // Above 2^63 (where llround overflows) and below 2^64: 9000000 TiB is exact in a double.
  EXPECT_EQ(try_parse_bytes("9000000T"), std::size_t{9000000} << 40);
  EXPECT_FALSE(try_parse_bytes("17000000TiB"));  // 1.87e19 > 2^64
}

TEST(units, formats_for_messages) {
  EXPECT_EQ(gpumem::format_bytes(12), "12 B");
  EXPECT_EQ(gpumem::format_bytes(1536), "1.50 KiB (1536 B)");
  EXPECT_EQ(gpumem::format_bytes(gpumem::GiB), "1.00 GiB (1073741824 B)");
}
