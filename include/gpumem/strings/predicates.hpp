// gpumem/strings/predicates.hpp
//
// The character-class predicates of Python's `str`, on a whole string: is_alnum(s) is
// s.isalnum(), ... is_ascii(s) is s.isascii(). Every one is false for the empty string except
// is_ascii (true), as in CPython.
//
//   if (strings::is_digit(v) && !strings::is_space(w)) ...   // in a kernel or on the host
//
//   is_alnum is_alpha is_decimal is_digit is_numeric is_space   every character has the property
//   is_lower   some character is cased lowercase and none is uppercase or titlecase (Lt)
//   is_upper   some character is uppercase and none is lowercase or titlecase
//   is_title   uppercase and titlecase characters only after uncased ones, lowercase only after
//              cased ones, and at least one cased character (CPython's istitle, word by word)
//   is_ascii   every byte is below 0x80
//
// The per-character properties are those of gpumem/strings/unicode.hpp (CPython's tables). The
// functions are GPUMEM_HD, allocate nothing, never fail and read the string once; pure-ASCII
// characters are answered without a table read. Bytes that are not valid UTF-8 read as U+FFFD
// (utf8::decode), which has none of the properties. Thread safety: they read only their argument.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/unicode.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings {

namespace detail {

// Whether every character of a non-empty `s` satisfies `property`.
template <class Property>
GPUMEM_HD bool all_characters(string_view s, Property property) {
  char const* const p = s.data();
  size_type const n = s.size_bytes();
  if (n == 0) return false;
  for (size_type i = 0; i < n;) {
    char32_t c;
    auto const b = static_cast<unsigned char>(p[i]);
    if (b < 0x80) {
      c = b;
      ++i;
    } else {
      i += utf8::decode(p + i, n - i, c);
    }
    if (!property(c)) return false;
  }
  return true;
}

struct alnum_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_alnum(c); }
};
struct alpha_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_alpha(c); }
};
struct decimal_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_decimal(c); }
};
struct digit_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_digit(c); }
};
struct numeric_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_numeric(c); }
};
struct space_property {
  GPUMEM_HD bool operator()(char32_t c) const { return unicode::is_space(c); }
};

// is_lower (lower = true) and is_upper (lower = false): CPython's islower/isupper.
GPUMEM_HD inline bool all_one_case(string_view s, bool lower) {
  char const* const p = s.data();
  size_type const n = s.size_bytes();
  bool cased = false;
  for (size_type i = 0; i < n;) {
    char32_t c;
    i += utf8::decode(p + i, n - i, c);
    bool const is_lower = unicode::is_lower(c), is_upper = unicode::is_upper(c);
    if ((lower ? is_upper : is_lower) || unicode::is_title(c)) return false;
    cased = cased || (lower ? is_lower : is_upper);
  }
  return cased;
}

}  // namespace detail

GPUMEM_HD inline bool is_alnum(string_view s) {
  return detail::all_characters(s, detail::alnum_property{});
}
GPUMEM_HD inline bool is_alpha(string_view s) {
  return detail::all_characters(s, detail::alpha_property{});
}
GPUMEM_HD inline bool is_decimal(string_view s) {
  return detail::all_characters(s, detail::decimal_property{});
}
GPUMEM_HD inline bool is_digit(string_view s) {
  return detail::all_characters(s, detail::digit_property{});
}
GPUMEM_HD inline bool is_numeric(string_view s) {
  return detail::all_characters(s, detail::numeric_property{});
}
GPUMEM_HD inline bool is_space(string_view s) {
  return detail::all_characters(s, detail::space_property{});
}
GPUMEM_HD inline bool is_lower(string_view s) {
  return detail::all_one_case(s, true);
}
GPUMEM_HD inline bool is_upper(string_view s) {
  return detail::all_one_case(s, false);
}

GPUMEM_HD inline bool is_title(string_view s) {
  char const* const p = s.data();
  size_type const n = s.size_bytes();
  bool cased = false, previous_is_cased = false;
  for (size_type i = 0; i < n;) {
    char32_t c;
    i += utf8::decode(p + i, n - i, c);
    if (unicode::is_upper(c) || unicode::is_title(c)) {
      if (previous_is_cased) return false;
      previous_is_cased = cased = true;
    } else if (unicode::is_lower(c)) {
      if (!previous_is_cased) return false;
      previous_is_cased = cased = true;
    } else {
      previous_is_cased = false;
    }
  }
  return cased;
}

GPUMEM_HD inline bool is_ascii(string_view s) {
  char const* const p = s.data();
  for (size_type i = 0, n = s.size_bytes(); i < n; ++i)
    if (static_cast<unsigned char>(p[i]) >= 0x80) return false;
  return true;
}

}  // namespace gpumem::strings
