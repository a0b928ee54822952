// The size arithmetic every allocation path uses (core/checked_arithmetic.hpp): each helper says
// when the result does not fit, and never writes a wrapped value.
#include <gpumem/core/checked_arithmetic.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>

namespace gpumem {
namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

TEST(checked_arithmetic, add_fits_up_to_size_max_and_no_further) {
  std::size_t out = 7;
  EXPECT_TRUE(checked_add(size_max - 1, 1, out));
  EXPECT_EQ(out, size_max);
  out = 7;
  EXPECT_FALSE(checked_add(size_max, 1, out));
  EXPECT_FALSE(checked_add(size_max - 255, 256, out));
  EXPECT_FALSE(checked_add(std::size_t{1} << 63, std::size_t{1} << 63, out));
  EXPECT_EQ(out, 7u) << "a sum that does not fit must not be written";
}

TEST(checked_arithmetic, mul_fits_up_to_size_max_and_no_further) {
  std::size_t out = 7;
  EXPECT_TRUE(checked_mul(size_max, 1, out));
  EXPECT_EQ(out, size_max);
  EXPECT_TRUE(checked_mul(size_max, 0, out));
  EXPECT_EQ(out, 0u);
  EXPECT_TRUE(checked_mul(std::size_t{1} << 31, std::size_t{1} << 32, out));
  EXPECT_EQ(out, std::size_t{1} << 63);
  out = 7;
  EXPECT_FALSE(checked_mul(std::size_t{1} << 32, std::size_t{1} << 32, out));
  EXPECT_FALSE(checked_mul(size_max / 3 + 1, 3, out));
  EXPECT_EQ(out, 7u);
}

TEST(checked_arithmetic, round_up_never_wraps_to_a_smaller_size) {
  std::size_t out = 0;
  EXPECT_TRUE(round_up_checked(0, 256, out));
  EXPECT_EQ(out, 0u);
  EXPECT_TRUE(round_up_checked(257, 256, out));
  EXPECT_EQ(out, 512u);
  EXPECT_TRUE(round_up_checked(1000, 3, out));  // not a power of two
  EXPECT_EQ(out, 1002u);
  // The largest multiple of 256 is its own round-up; one byte more cannot be rounded.
  EXPECT_TRUE(round_up_checked(size_max - 255, 256, out));
  EXPECT_EQ(out, size_max - 255);
  out = 7;
  for (std::size_t bytes : {size_max, size_max - 1, size_max - 128, size_max - 254})
    EXPECT_FALSE(round_up_checked(bytes, 256, out)) << bytes;
  EXPECT_FALSE(round_up_checked(size_max, 10, out));  // SIZE_MAX is a multiple of 3, not of 10
  EXPECT_EQ(out, 7u);
  // Below max_allocation_bytes, any power-of-two step up to 2^62 fits.
  EXPECT_TRUE(round_up_checked(max_allocation_bytes, std::size_t{1} << 62, out));
  EXPECT_EQ(out, std::size_t{1} << 63);
}

TEST(checked_arithmetic, saturating_add_stops_at_size_max) {
  EXPECT_EQ(saturating_add(1, 2), 3u);
  EXPECT_EQ(saturating_add(size_max - 1, 1), size_max);
  EXPECT_EQ(saturating_add(size_max, size_max), size_max);
}

TEST(checked_arithmetic, max_allocation_bytes_is_ptrdiff_max) {
  EXPECT_EQ(max_allocation_bytes,
            static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()));
}

// The helpers are constexpr (and GPUMEM_HD): usable in constant expressions and device code.
static_assert(saturating_add(size_max, 1) == size_max);
static_assert([] {
  std::size_t out = 0;
  return round_up_checked(300, 256, out) && out == 512;
}());

}  // namespace
}  // namespace gpumem
