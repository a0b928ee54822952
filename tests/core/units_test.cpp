#include <gpumem/core/units.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>

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

// Malformed numbers are std::nullopt (the caller's logic_error names the text), never an untyped
// exception from a number conversion.
TEST(units, malformed_numbers_are_rejected_not_thrown) {
  for (char const* text : {".", ".GiB", " . ", "..5", "1..5", "1.5.3", "+5", "5 5", "1e3", "0x10",
                           "inf", "nan", "1.5 XiB", "GiB5"}) {
    std::optional<std::size_t> parsed;
    EXPECT_NO_THROW(parsed = try_parse_bytes(text)) << text;
    EXPECT_FALSE(parsed) << text << " parsed as " << parsed.value_or(0);
  }
  std::string const long_number(400, '9');
  EXPECT_NO_THROW(EXPECT_FALSE(try_parse_bytes(long_number)));
  EXPECT_NO_THROW(EXPECT_FALSE(try_parse_bytes(long_number + ".5")));
  EXPECT_NO_THROW(EXPECT_FALSE(try_parse_bytes(long_number + "GiB")));
  EXPECT_NO_THROW(EXPECT_FALSE(try_parse_bytes("0." + long_number + "x")));
  // Leading zeros and a long fraction are fine: the number is exact, not too large.
  EXPECT_EQ(try_parse_bytes(std::string(400, '0') + "12"), 12u);
  EXPECT_EQ(try_parse_bytes("0.5" + std::string(400, '0') + "KiB"), 512u);
  EXPECT_EQ(try_parse_bytes(".5KiB"), 512u);
  EXPECT_EQ(try_parse_bytes("2."), 2u);
}

// A fraction of a byte rounds up: a quantity that is not zero is never 0 bytes. Whole bytes are
// exact (no floating point on the way).
TEST(units, fractions_of_a_byte_round_up) {
  EXPECT_EQ(try_parse_bytes("0.4"), 1u);
  EXPECT_EQ(try_parse_bytes("0.0001KiB"), 1u);  // 0.1024 bytes
  EXPECT_EQ(try_parse_bytes("1.5"), 2u);
  EXPECT_EQ(try_parse_bytes("1.5B"), 2u);
  EXPECT_EQ(try_parse_bytes("0.0"), 0u);
  EXPECT_EQ(try_parse_bytes("0.000GiB"), 0u);
  EXPECT_EQ(try_parse_bytes("1.1KiB"), 1127u);       // 1126.4
  EXPECT_EQ(try_parse_bytes("0.1GiB"), 107374183u);  // 107374182.4
  EXPECT_EQ(try_parse_bytes("1.25 MiB"), 1310720u);  // exact
  // Just below 2^64 bytes (16777216 TiB): up to SIZE_MAX, exactly; a fraction more is too large.
  EXPECT_EQ(try_parse_bytes("16777215.999999999999 TiB"), ~std::size_t{0});  // 2^64 - 1.0995
  EXPECT_FALSE(try_parse_bytes("16777215.99999999999999999999 TiB"));        // 2^64 - 1.1e-8
  EXPECT_FALSE(try_parse_bytes("16777216 TiB"));
  EXPECT_FALSE(try_parse_bytes("18446744073709551615.5"));  // rounds up past SIZE_MAX
}

TEST(units, formats_for_messages) {
  EXPECT_EQ(gpumem::format_bytes(12), "12 B");
  EXPECT_EQ(gpumem::format_bytes(1536), "1.50 KiB (1536 B)");
  EXPECT_EQ(gpumem::format_bytes(gpumem::GiB), "1.00 GiB (1073741824 B)");
}
