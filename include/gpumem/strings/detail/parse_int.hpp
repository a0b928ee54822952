// gpumem/strings/detail/parse_int.hpp — not API: int(s, base) for strings/convert.hpp.
//
// The steps of CPython 3.11's PyLong_FromString on number_text: whitespace, a sign, the base
// prefix (base 0 chooses by it; "0" followed by more digits is allowed only when they are all
// zero), one optional underscore after a prefix, digits with single underscores between them,
// whitespace, the end. A base that is not a power of two refuses more than 4300 digits
// (CPython's default int_max_str_digits). The magnitude is accumulated in 64 bits; the parse
// goes on past an overflow so that an invalid string still reports value_error, as Python would.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/number_text.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

inline constexpr size_type int_max_str_digits = 4300;

GPUMEM_HD inline char ascii_fold(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline result<std::int64_t> parse_int(string_view s, int base) {
  result<std::int64_t> r;
  r.error = errc::value_error;
  if ((base != 0 && base < 2) || base > 36) return r;
  number_text t(s);
  while (is_py_ascii_space(t.peek()))
    t.advance();
  bool negative = false;
  if (t.peek() == '+') {
    t.advance();
  } else if (t.peek() == '-') {
    negative = true;
    t.advance();
  }
  bool error_if_nonzero = false;
  if (base == 0) {
    char const next = ascii_fold(t.peek_next());
    if (t.peek() != '0') {
      base = 10;
    } else if (next == 'x') {
      base = 16;
    } else if (next == 'o') {
      base = 8;
    } else if (next == 'b') {
      base = 2;
    } else {  // "old" C-style octal such as 010: invalid unless zero
      error_if_nonzero = true;
      base = 10;
    }
  }
  if (t.peek() == '0') {
    char const next = ascii_fold(t.peek_next());
    if ((base == 16 && next == 'x') || (base == 8 && next == 'o') || (base == 2 && next == 'b')) {
      t.advance();
      t.advance();
      if (t.peek() == '_') t.advance();  // one underscore allowed after the prefix
    }
  }
  if (t.peek() == '_') return r;

  std::uint64_t magnitude = 0;
  bool overflow = false;
  size_type digits = 0;
  char previous = '\0';
  for (;; t.advance()) {
    char const c = t.peek();
    int const d = digit_value(c);
    if (d < base) {
      if (magnitude > (UINT64_MAX - static_cast<std::uint64_t>(d)) / static_cast<unsigned>(base))
        overflow = true;
      else
        magnitude = magnitude * static_cast<unsigned>(base) + static_cast<unsigned>(d);
      ++digits;
    } else if (c == '_') {
      if (previous == '_') return r;
    } else {
      break;
    }
    previous = c;
  }
  if (previous == '_' || digits == 0) return r;
  if ((base & (base - 1)) != 0 && digits > int_max_str_digits) return r;
  if (error_if_nonzero && (magnitude != 0 || overflow)) return r;
  while (is_py_ascii_space(t.peek()))
    t.advance();
  if (!t.at_end()) return r;

  std::uint64_t const limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  if (overflow || magnitude > limit) {
    r.error = errc::overflow_error;
    return r;
  }
  r.error = errc::ok;
  r.value =
      negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return r;
}

}  // namespace gpumem::strings::detail
