// gpumem/strings/detail/parse_float.hpp — not API: float(s) for strings/convert.hpp.
//
// The steps of CPython 3.11's PyFloat_FromString on number_text: underscores are checked first
// over the whole text (each one between two ASCII digits, after the decimal rewrite) and then
// ignored; whitespace; then what _Py_dg_strtod reads — a sign, digits with an optional point
// (at least one digit), an optional exponent (e, a sign, at least one digit) — or, when there are
// no digits, "inf", "infinity" or "nan" in any case right after the sign (".inf" is no number);
// whitespace; the end. The digits go to decimal_to_double, which rounds correctly. Exponents are
// clamped far outside the range of doubles (as dtoa does), so any number of exponent digits is
// fine.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/decimal_to_double.hpp>
#include <gpumem/strings/detail/number_text.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

GPUMEM_HD inline bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// CPython's _Py_string_to_number_with_underscores check: valid when every '_' of the text
// follows a digit and precedes one.
GPUMEM_HD inline bool float_underscores_valid(string_view s) {
  number_text t(s);
  char previous = '\0';
  for (; !t.at_end(); t.advance()) {
    char const c = t.peek();
    if (c == '_' ? !is_ascii_digit(previous) : previous == '_' && !is_ascii_digit(c)) return false;
    previous = c;
  }
  return previous != '_';
}

// number_text with the (validated) underscores skipped.
class float_text {
 public:
  GPUMEM_HD explicit float_text(string_view s) : t_(s) {}
  GPUMEM_HD char peek() const { return t_.peek(); }
  GPUMEM_HD void advance() {
    t_.advance();
    while (t_.peek() == '_')
      t_.advance();
  }
  GPUMEM_HD bool at_end() const { return t_.at_end(); }
  // Consumes `word` (lowercase ASCII) matched in any case; false (having consumed a part of it)
  // when it does not match.
  GPUMEM_HD bool match(char const* word) {
    for (; *word != '\0'; ++word, advance())
      if (ascii_lower(peek()) != *word) return false;
    return true;
  }

 private:
  GPUMEM_HD static char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  }
  number_text t_;
};

GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline result<double> parse_float(string_view s) {
  result<double> r;
  r.error = errc::value_error;
  char const* const bytes = s.data();
  for (size_type i = 0; i < s.size_bytes(); ++i)
    if (bytes[i] == '_') {
      if (!float_underscores_valid(s)) return r;
      break;
    }

  float_text t(s);
  while (is_py_ascii_space(t.peek()))
    t.advance();
  bool const negative = t.peek() == '-';
  if (negative || t.peek() == '+') t.advance();

  char digits[max_decimal_digits + 1];
  int n = 0;
  bool sticky = false, any_digit = false;
  std::int64_t e10 = 0;
  for (; is_ascii_digit(t.peek()); t.advance()) {
    any_digit = true;
    char const d = static_cast<char>(t.peek() - '0');
    if (n == 0 && d == 0) continue;  // a leading zero
    if (n < max_decimal_digits) {
      digits[n++] = d;
    } else {
      ++e10;
      sticky = sticky || d != 0;
    }
  }
  bool const point = t.peek() == '.';
  if (point) {
    t.advance();
    for (; is_ascii_digit(t.peek()); t.advance()) {
      any_digit = true;
      char const d = static_cast<char>(t.peek() - '0');
      if (n == 0 && d == 0) {
        --e10;
      } else if (n < max_decimal_digits) {
        digits[n++] = d;
        --e10;
      } else {
        sticky = sticky || d != 0;
      }
    }
  }

  double value = 0;
  if (any_digit) {
    if (t.peek() == 'e' || t.peek() == 'E') {
      t.advance();
      bool const negative_exponent = t.peek() == '-';
      if (negative_exponent || t.peek() == '+') t.advance();
      if (!is_ascii_digit(t.peek())) return r;  // dtoa stops before the 'e': text is left over
      std::int64_t exponent = 0;
      for (; is_ascii_digit(t.peek()); t.advance())
        if (exponent < 1100000000) exponent = exponent * 10 + (t.peek() - '0');
      e10 += negative_exponent ? -exponent : exponent;
    }
    if (sticky) {
      digits[n++] = 1;
      --e10;
    }
    while (n > 0 && digits[n - 1] == 0) {
      --n;
      ++e10;
    }
    value = decimal_to_double(digits, n, e10, negative);
  } else {
    // No digits: only "inf", "infinity" or "nan" may follow the sign, so a point consumed above
    // (".", ".inf", "-.nan") makes the text no number (dtoa reads nothing; neither does
    // _Py_parse_inf_or_nan, which starts again after the sign).
    if (point) return r;
    char const first = t.peek();
    if (first == 'i' || first == 'I') {
      if (!t.match("inf")) return r;
      if ((t.peek() == 'i' || t.peek() == 'I') && !t.match("inity")) return r;
      value = double_from_bits((negative ? std::uint64_t{1} << 63 : 0) | double_infinity_bits);
    } else if (first == 'n' || first == 'N') {
      if (!t.match("nan")) return r;
      value = double_from_bits((negative ? std::uint64_t{1} << 63 : 0) | 0x7FF8000000000000ull);
    } else {
      return r;
    }
  }
  while (is_py_ascii_space(t.peek()))
    t.advance();
  if (!t.at_end()) return r;
  r.value = value;
  r.error = errc::ok;
  return r;
}

}  // namespace gpumem::strings::detail
