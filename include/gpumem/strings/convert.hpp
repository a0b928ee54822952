// gpumem/strings/convert.hpp
//
// Numbers from and to strings, as Python's int(), float(), str(int) and repr(float):
//
//   strings::result<std::int64_t> i = strings::to_int(v);        // int(v)
//   strings::result<std::int64_t> h = strings::to_int(v, 16);    // int(v, 16); base 0: by prefix
//   strings::result<double> d = strings::to_float(v);            // float(v)
//   if (!i.ok()) ... i.error                                     // value_error / overflow_error
//   strings::udf_string a = strings::from_int(-42);              // "-42"
//   strings::udf_string b = strings::from_float(0.1);            // "0.1", as repr(0.1)
//
// to_int(s, base): int(s, base) of a str — surrounding whitespace (str.isspace), a sign, the
//   prefixes 0x 0o 0b (base 0 takes the base from the prefix, decimal without one; 16, 8, 2
//   allow their own), single underscores between digits and after a prefix, digits of any
//   script (Unicode decimal digits), bases 0 and 2..36;
//   for base 0 a leading 0 must be followed by zeros only. Invalid text or base: value_error; more
//   than 4300 digits in a base that is not a power of two: value_error (CPython's default limit).
//   THE ONE DIFFERENCE FROM PYTHON: a value outside int64 is overflow_error, where Python, with
//   big integers, would succeed.
// to_float(s): float(s) — whitespace, a sign, digits with an optional point and exponent,
//   "inf", "infinity", "nan" in any case, underscores between digits, digits of any script.
//   Correctly rounded (to nearest, ties to even) for any number of digits; values too large are
//   +-inf and too small +-0.0, as in Python. Invalid text: value_error.
// from_int(v): str(v), INT64_MIN included. from_float(v): repr(v) — the shortest digits that read
//   back as v: "0.1", "1e+16", "1e-05", "0.0001", "123.0", "-0.0", "inf", "-inf", "nan".
//
// All are GPUMEM_HD. to_int and to_float allocate nothing; from_int and from_float allocate the
// result once (a udf_string on the NRT heap: errc::out_of_memory when the heap is full). Invalid
// UTF-8 reads as U+FFFD, which makes a number invalid. The slow paths (long or extreme decimal
// inputs, shortest digits) use exact big-integer arithmetic on the stack (up to about 2 KB) and are
// kept out of line. Thread safety: each call reads only its arguments and owns its result.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/format_number.hpp>
#include <gpumem/strings/detail/parse_float.hpp>
#include <gpumem/strings/detail/parse_int.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <cstdint>

namespace gpumem::strings {

GPUMEM_HD inline result<std::int64_t> to_int(string_view s, int base = 10) {
  return detail::parse_int(s, base);
}

GPUMEM_HD inline result<double> to_float(string_view s) {
  return detail::parse_float(s);
}

GPUMEM_HD inline udf_string from_int(std::int64_t v) {
  char text[detail::number_text_capacity];
  int const n = detail::format_int(v, text);
  udf_string out;
  out.append(text, n);
  return out;
}

GPUMEM_HD inline udf_string from_float(double v) {
  char text[detail::number_text_capacity];
  int const n = detail::format_float_repr(v, text);
  udf_string out;
  out.append(text, n);
  return out;
}

}  // namespace gpumem::strings
