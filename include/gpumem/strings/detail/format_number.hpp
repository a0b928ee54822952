// gpumem/strings/detail/format_number.hpp — not API: the text of str(int) and repr(float) into a
// small local buffer (at most 25 bytes), for strings/convert.hpp.
//
// repr(float) follows CPython's format_float_short for the 'r' code: the shortest digits
// (shortest_digits.hpp) with the decimal point at `point` (value = 0.d1...dn x 10^point) are
// written positionally when -4 < point <= 16 — "0.0001", "123.0", "1e+16" is the first that is
// not — and otherwise as d1[.d2...dn]e<sign><at least two digits>: "1e-05", "1.5e+300". Zero is
// "0.0" or "-0.0", the others "inf", "-inf" and "nan" (whatever the sign of the NaN).
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/decimal_to_double.hpp>
#include <gpumem/strings/detail/shortest_digits.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

inline constexpr int number_text_capacity = 32;

// Writes the decimal digits of v (no sign) at out; returns how many.
GPUMEM_HD inline int write_unsigned(std::uint64_t v, char* out) {
  char reversed[20];
  int n = 0;
  do {
    reversed[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = 0; i < n; ++i)
    out[i] = reversed[n - 1 - i];
  return n;
}

GPUMEM_HD inline int format_int(std::int64_t v, char* out) {
  if (v >= 0) return write_unsigned(static_cast<std::uint64_t>(v), out);
  out[0] = '-';
  return 1 + write_unsigned(0 - static_cast<std::uint64_t>(v), out + 1);
}

GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline int format_float_repr(double value, char* out) {
  std::uint64_t const bits = bits_of_double(value);
  std::uint64_t const magnitude = bits & ~(std::uint64_t{1} << 63);
  int n = 0;
  if (magnitude > double_infinity_bits) {
    out[0] = 'n', out[1] = 'a', out[2] = 'n';
    return 3;
  }
  if ((bits >> 63) != 0) out[n++] = '-';
  if (magnitude == double_infinity_bits) {
    out[n] = 'i', out[n + 1] = 'n', out[n + 2] = 'f';
    return n + 3;
  }
  if (magnitude == 0) {
    out[n] = '0', out[n + 1] = '.', out[n + 2] = '0';
    return n + 3;
  }
  decimal_digits const d = shortest_digits(magnitude);
  if (d.point > -4 && d.point <= 16) {
    if (d.point <= 0) {
      out[n++] = '0';
      out[n++] = '.';
      for (int i = d.point; i < 0; ++i)
        out[n++] = '0';
      for (int i = 0; i < d.count; ++i)
        out[n++] = static_cast<char>('0' + d.digit[i]);
      return n;
    }
    for (int i = 0; i < d.count || i < d.point; ++i) {
      if (i == d.point) out[n++] = '.';
      out[n++] = static_cast<char>('0' + (i < d.count ? d.digit[i] : 0));
    }
    if (d.count <= d.point) {
      out[n++] = '.';
      out[n++] = '0';
    }
    return n;
  }
  out[n++] = static_cast<char>('0' + d.digit[0]);
  if (d.count > 1) {
    out[n++] = '.';
    for (int i = 1; i < d.count; ++i)
      out[n++] = static_cast<char>('0' + d.digit[i]);
  }
  int exponent = d.point - 1;
  out[n++] = 'e';
  out[n++] = exponent < 0 ? '-' : '+';
  if (exponent < 0) exponent = -exponent;
  if (exponent < 10) out[n++] = '0';
  return n + write_unsigned(static_cast<std::uint64_t>(exponent), out + n);
}

}  // namespace gpumem::strings::detail
