// gpumem/strings/strip.hpp
//
// Python's str.strip, lstrip and rstrip on device strings. The result is a view of the argument
// (Python's stripped string needs no new bytes), so it lives as long as the argument's bytes.
//
//   using namespace gpumem::strings;
//   string_view a = strip(s);          // s.strip(): Unicode whitespace, as str.isspace
//   string_view b = rstrip(s, "xy");   // s.rstrip("xy"): any of the code points of "xy"
//
// Without `chars`, whitespace is what unicode::is_space says (the ASCII separators \x1c-\x1f,
// U+0085, U+00A0, U+2028, U+3000 ... included). With `chars`, the set of its code points; an empty
// `chars` strips nothing. Everything is GPUMEM_HD, allocates nothing, never fails and only reads
// its arguments (any number of threads). Invalid UTF-8 bytes are U+FFFD, one byte each.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/unicode.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings {

namespace detail {

// What strip removes: whitespace, or the code points of a set.
struct strip_set {
  string_view chars;
  bool whitespace;
  GPUMEM_HD bool has(char32_t c) const {
    return whitespace ? unicode::is_space(c) : contains_code_point(chars, c);
  }
};

GPUMEM_HD inline size_type strip_left(string_view s, strip_set const& set) {
  size_type i = 0;
  while (i < s.size_bytes()) {
    char32_t c = 0;
    int const used = utf8::decode(s.data() + i, s.size_bytes() - i, c);
    if (!set.has(c)) break;
    i += used;
  }
  return i;
}

// The end of what remains after stripping the right of s[from:].
GPUMEM_HD inline size_type strip_right(string_view s, size_type from, strip_set const& set) {
  size_type end = s.size_bytes();
  while (end > from) {
    size_type at = end;
    if (!set.has(decode_backward(s.data(), at))) break;
    end = at;
  }
  return end;
}

GPUMEM_HD inline string_view strip_sides(string_view s, strip_set const& set, bool left,
                                         bool right) {
  size_type const begin = left ? strip_left(s, set) : 0;
  size_type const end = right ? strip_right(s, begin, set) : s.size_bytes();
  return string_view(s.data() + begin, end - begin);
}

}  // namespace detail

// s.strip(), s.lstrip(), s.rstrip(): without whitespace at both ends / the start / the end.
GPUMEM_HD inline string_view strip(string_view s) {
  return detail::strip_sides(s, {string_view(), true}, true, true);
}
GPUMEM_HD inline string_view lstrip(string_view s) {
  return detail::strip_sides(s, {string_view(), true}, true, false);
}
GPUMEM_HD inline string_view rstrip(string_view s) {
  return detail::strip_sides(s, {string_view(), true}, false, true);
}

// s.strip(chars), s.lstrip(chars), s.rstrip(chars): without the code points of `chars`.
GPUMEM_HD inline string_view strip(string_view s, string_view chars) {
  return detail::strip_sides(s, {chars, false}, true, true);
}
GPUMEM_HD inline string_view lstrip(string_view s, string_view chars) {
  return detail::strip_sides(s, {chars, false}, true, false);
}
GPUMEM_HD inline string_view rstrip(string_view s, string_view chars) {
  return detail::strip_sides(s, {chars, false}, false, true);
}

}  // namespace gpumem::strings
