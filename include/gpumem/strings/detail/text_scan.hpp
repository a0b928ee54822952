// gpumem/strings/detail/text_scan.hpp
//
// Internals shared by the string functions (search, strip, split, replace, slice, pad, combine):
// CPython's index normalisation, byte-level substring search, stepping back one character, and
// size arithmetic that cannot wrap. Not API: names and signatures may change.
//
// Why byte-level search is enough: UTF-8 is self-synchronising, so in valid UTF-8 an occurrence of
// a valid needle found byte by byte always starts and ends on character boundaries; positions are
// turned into character indices only where a result needs them. Everything here is GPUMEM_HD,
// allocates nothing and never fails; reads stay inside [data, data + bytes) even on invalid UTF-8.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/utf8.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

inline constexpr size_type size_type_max = INT64_MAX;

GPUMEM_HD inline bool is_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0u) == 0x80u;
}

// CPython's ADJUST_INDICES: negative indices count from the end, `end` is clamped to [0, len],
// `start` only from below (a start past the end makes every range empty). No sum can wrap: a
// negative index plus a length in [0, INT64_MAX] stays in range.
GPUMEM_HD inline void adjust_indices(size_type& start, size_type& end, size_type len) {
  if (end > len) {
    end = len;
  } else if (end < 0) {
    end += len;
    if (end < 0) end = 0;
  }
  if (start < 0) {
    start += len;
    if (start < 0) start = 0;
  }
}

// The byte where character `index` starts (0 <= index <= length); `ascii`: the string is all ASCII,
// bytes are characters.
GPUMEM_HD inline size_type byte_of(string_view s, size_type index, bool ascii) {
  return ascii ? index : s.byte_offset(index);
}

// The start of the character that ends at byte `pos` (0 < pos <= bytes): the lead byte at most 3
// continuation bytes back, when decoding from it gives exactly that character; else pos - 1 (an
// invalid byte is one character of its own, as the forward decoder treats it).
GPUMEM_HD inline size_type previous_char_start(char const* data, size_type pos) {
  size_type p = pos - 1;
  size_type const limit = pos >= 4 ? pos - 4 : 0;
  while (p > limit && is_continuation(data[p]))
    --p;
  char32_t cp = 0;
  if (utf8::decode(data + p, pos - p, cp) != pos - p) return pos - 1;
  return p;
}

// The code point ending at `pos`, and `pos` moved to its start.
GPUMEM_HD inline char32_t decode_backward(char const* data, size_type& pos) {
  size_type const start = previous_char_start(data, pos);
  char32_t cp = 0;
  utf8::decode(data + start, pos - start, cp);
  pos = start;
  return cp;
}

GPUMEM_HD inline bool bytes_equal(char const* a, char const* b, size_type n) {
  for (size_type i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// First byte offset of `needle` in hay[0, n), or -1; an empty needle is found at 0.
GPUMEM_HD inline size_type find_bytes(char const* hay, size_type n, char const* needle,
                                      size_type m) {
  if (m == 0) return 0;
  if (m > n) return -1;
  char const first = needle[0];
  size_type const last_start = n - m;
  for (size_type i = 0; i <= last_start; ++i)
    if (hay[i] == first && bytes_equal(hay + i + 1, needle + 1, m - 1)) return i;
  return -1;
}

// Last byte offset of `needle` in hay[0, n), or -1; an empty needle is found at n.
GPUMEM_HD inline size_type rfind_bytes(char const* hay, size_type n, char const* needle,
                                       size_type m) {
  if (m == 0) return n;
  if (m > n) return -1;
  char const first = needle[0];
  for (size_type i = n - m; i >= 0; --i)
    if (hay[i] == first && bytes_equal(hay + i + 1, needle + 1, m - 1)) return i;
  return -1;
}

GPUMEM_HD inline bool contains_code_point(string_view set, char32_t c) {
  char const* p = set.data();
  size_type left = set.size_bytes();
  while (left > 0) {
    char32_t member = 0;
    int const used = utf8::decode(p, left, member);
    if (member == c) return true;
    p += used;
    left -= used;
  }
  return false;
}

// a + b and a * b for non-negative sizes; false (out untouched) when the result passes INT64_MAX.
GPUMEM_HD inline bool checked_add(size_type a, size_type b, size_type& out) {
  if (a > size_type_max - b) return false;
  out = a + b;
  return true;
}
GPUMEM_HD inline bool checked_mul(size_type a, size_type b, size_type& out) {
  if (a != 0 && b > size_type_max / a) return false;
  out = a * b;
  return true;
}

}  // namespace gpumem::strings::detail
