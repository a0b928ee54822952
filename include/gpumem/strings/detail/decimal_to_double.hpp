// gpumem/strings/detail/decimal_to_double.hpp — not API: a decimal significand and exponent to the
// nearest double (ties to even), as CPython's float() rounds.
//
// Input: digits[0..n) (values 0..9, digits[0] != 0, at most max_decimal_digits + 1) and e10, for
// the value 0.d1d2...dn x 10^(n + e10) = D x 10^e10.
//
// Fast path (Clinger): D < 10^15 and |e10| <= 22 are exact doubles, so one IEEE multiplication or
// division rounds correctly. Otherwise the exact value is the fraction num / den of two big
// integers (D x 10^e10 over 1, or D over 10^-e10). The numerator is shifted until
// den <= num < 2 den, which gives the binary exponent, and long division produces the 53 bits
// (fewer for subnormals) one at a time; the remainder decides the rounding. Simple and exact:
// this path is for long or extreme inputs, where speed matters little.
//
// Why a bounded number of digits suffices: a value halfway between two doubles has at most 767
// significant digits, so the parser keeps 800 and, if any later digit is non-zero, appends one
// digit 1: the kept value then lies on the same side of every halfway point as the full one.
// Bounds: a value below 10^-324 rounds to 0, one at or above 10^309 to infinity, so the big
// integers never exceed 10^1125 shifted by a few bits (big_uint's capacity).
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/big_uint.hpp>
#include <gpumem/strings/types.hpp>

#include <cstdint>
#include <cstring>

namespace gpumem::strings::detail {

inline constexpr int max_decimal_digits = 800;

GPUMEM_HD inline double double_from_bits(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

GPUMEM_HD inline std::uint64_t bits_of_double(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

inline constexpr std::uint64_t double_infinity_bits = 0x7FF0000000000000ull;

// The bits of the positive double nearest D x 10^e10 (the slow path).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline std::uint64_t exact_decimal_to_bits(char const* digits,
                                                                             int n,
                                                                             std::int64_t e10) {
  big_uint<128> num, den;
  num.set(0);
  for (int i = 0; i < n;) {
    std::uint32_t chunk = 0, scale = 1;
    for (int k = 0; k < 9 && i < n; ++k, ++i) {
      chunk = chunk * 10 + static_cast<std::uint32_t>(digits[i]);
      scale *= 10;
    }
    num.multiply_add(scale, chunk);
  }
  den.set(1);
  if (e10 >= 0)
    num.multiply_pow10(static_cast<int>(e10));
  else
    den.multiply_pow10(static_cast<int>(-e10));

  // Align: den <= num < 2 den, value = num / den x 2^exponent.
  int exponent = num.bit_length() - den.bit_length();
  if (exponent > 0)
    den.shift_left(exponent);
  else
    num.shift_left(-exponent);
  if (compare(num, den) < 0) {
    num.shift_left(1);
    --exponent;
  }
  if (num.overflowed || den.overflowed) return 0;  // unreachable within the bounds above
  if (exponent > 1023) return double_infinity_bits;

  // Bits of the significand: 53 for a normal result, fewer down to none for subnormals, whose
  // unit is 2^-1074.
  int const bits = exponent >= -1022 ? 53 : exponent + 1075;
  if (bits < 0) return 0;
  std::uint64_t q = 0;
  for (int i = 0; i < bits; ++i) {
    q <<= 1;
    if (compare(num, den) >= 0) {
      num.subtract(den);
      q |= 1;
    }
    num.shift_left(1);
  }
  // num is now twice the remainder: compare it with den for the half unit.
  int const half = compare(num, den);
  if (half > 0 || (half == 0 && (q & 1) != 0)) ++q;
  if (bits < 53) return q;  // subnormal (q == 2^52 is the smallest normal: the same bits)
  if (q == (std::uint64_t{1} << 53)) {
    q >>= 1;
    ++exponent;
  }
  if (exponent > 1023) return double_infinity_bits;
  return (static_cast<std::uint64_t>(exponent + 1023) << 52) | (q & ((std::uint64_t{1} << 52) - 1));
}

// The double nearest D x 10^e10, negated when `negative` (digits as above; n == 0 means zero).
GPUMEM_HD inline double decimal_to_double(char const* digits, int n, std::int64_t e10,
                                          bool negative) {
  std::uint64_t const sign = negative ? std::uint64_t{1} << 63 : 0;
  if (n == 0) return double_from_bits(sign);
  if (n <= 15 && e10 >= -22 && e10 <= 22) {
    std::uint64_t d = 0;
    for (int i = 0; i < n; ++i)
      d = d * 10 + static_cast<std::uint64_t>(digits[i]);
    double scale = 1.0;
    for (std::int64_t k = e10 < 0 ? -e10 : e10; k > 0; --k)
      scale *= 10.0;  // 10^k for k <= 22 is exact, and so is every step
    double const magnitude =
        e10 < 0 ? static_cast<double>(d) / scale : static_cast<double>(d) * scale;
    return negative ? -magnitude : magnitude;
  }
  if (n + e10 - 1 >= 309) return double_from_bits(sign | double_infinity_bits);
  if (n + e10 <= -324) return double_from_bits(sign);
  return double_from_bits(sign | exact_decimal_to_bits(digits, n, e10));
}

}  // namespace gpumem::strings::detail
