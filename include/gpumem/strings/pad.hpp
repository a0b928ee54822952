// gpumem/strings/pad.hpp
//
// Python's str.zfill, center, ljust, rjust and expandtabs on device strings.
//
//   using namespace gpumem::strings;
//   udf_string a = zfill("-42", 6);          // "-00042": zeros after a leading sign
//   udf_string b = center("ab", 7, U'*');    // "***ab**": CPython puts an odd extra on the left
//                                            // only when the width is odd as well
//   udf_string c = ljust(s, 10);             // s.ljust(10), fill U' '
//   udf_string d = expandtabs("a\tb", 4);    // "a   b": columns restart after \n and \r
//
// Widths are in characters; a width at or below the length gives a copy of the argument (Python
// returns the argument itself). Every result is made with one allocation of its exact size.
//
// Errors: a result past INT64_MAX bytes (a huge width or tab size) or an exhausted heap gives a
// failed udf_string with errc::out_of_memory, never a wrapped size (Python raises OverflowError or
// MemoryError). The heap is the one nrt::launch made current; the arguments are only read.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>
#include <gpumem/strings/utf8.hpp>

#include <cstring>

namespace gpumem::strings {

namespace detail {

// Writes `count` copies of the encoded `unit` (n bytes) at w; returns the byte after them.
GPUMEM_HD inline char* put_fill(char* w, char const* unit, int n, size_type count) {
  if (n == 1) {
    if (count > 0) std::memset(w, unit[0], static_cast<std::size_t>(count));
    return w + count;
  }
  for (size_type i = 0; i < count; ++i)
    for (int k = 0; k < n; ++k)
      *w++ = unit[k];
  return w;
}

// `left` fills, s, `right` fills: one allocation of the exact size.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string pad_sides(string_view s, size_type left,
                                                              size_type right, char32_t fill) {
  udf_string out;
  char unit[4];
  int const n = utf8::encode(fill, unit);
  size_type total = 0;
  // left + right is the margin, below INT64_MAX.
  if (!checked_mul(left + right, n, total) || !checked_add(total, s.size_bytes(), total)) {
    detail::fail_oversized(out);
    return out;
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  char* w = put_fill(out.data(), unit, n, left);
  if (s.size_bytes() > 0) std::memcpy(w, s.data(), static_cast<std::size_t>(s.size_bytes()));
  put_fill(w + s.size_bytes(), unit, n, right);
  return out;
}

// width - length when positive, else 0 (no padding); the length is counted only when needed.
GPUMEM_HD inline size_type margin(string_view s, size_type width) {
  if (width <= 0) return 0;
  size_type const len = s.length();
  return width > len ? width - len : 0;
}

}  // namespace detail

// s.center(width, fill): the extra fill of an odd margin goes left only when width is odd too.
GPUMEM_HD inline udf_string center(string_view s, size_type width, char32_t fill = U' ') {
  size_type const m = detail::margin(s, width);
  size_type const left = m / 2 + (m & width & 1);
  return detail::pad_sides(s, left, m - left, fill);
}

// s.ljust(width, fill): s, then fill.
GPUMEM_HD inline udf_string ljust(string_view s, size_type width, char32_t fill = U' ') {
  return detail::pad_sides(s, 0, detail::margin(s, width), fill);
}

// s.rjust(width, fill): fill, then s.
GPUMEM_HD inline udf_string rjust(string_view s, size_type width, char32_t fill = U' ') {
  return detail::pad_sides(s, detail::margin(s, width), 0, fill);
}

// s.zfill(width): zeros on the left, after a leading '+' or '-' (which moves to the front).
GPUMEM_HD inline udf_string zfill(string_view s, size_type width) {
  size_type const m = detail::margin(s, width);
  udf_string out = detail::pad_sides(s, m, 0, U'0');
  if (m > 0 && !s.empty() && !out.failed() && (s.data()[0] == '+' || s.data()[0] == '-')) {
    out.data()[0] = s.data()[0];
    out.data()[m] = '0';
  }
  return out;
}

// s.expandtabs(tabsize): each tab becomes the spaces up to the next multiple of tabsize columns
// (none for tabsize <= 0); \n and \r restart the column count.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string expandtabs(string_view s,
                                                               size_type tabsize = 8) {
  udf_string out;
  char const* const data = s.data();
  size_type const bytes = s.size_bytes();
  // Pass 1: the size. Columns are characters; bytes are what the result holds.
  size_type total = 0;
  size_type column = 0;
  for (size_type i = 0; i < bytes; ++i) {
    char const c = data[i];
    if (c == '\t') {
      if (tabsize > 0) {
        size_type const spaces = tabsize - column % tabsize;
        // column <= total: checking total covers both.
        if (!detail::checked_add(total, spaces, total)) {
          detail::fail_oversized(out);
          return out;
        }
        column += spaces;
      }
    } else {
      if (!detail::checked_add(total, size_type{1}, total)) {  // after tabs that filled INT64_MAX
        detail::fail_oversized(out);
        return out;
      }
      if (!detail::is_continuation(c)) ++column;
      if (c == '\n' || c == '\r') column = 0;
    }
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  // Pass 2: the same walk, writing.
  char* w = out.data();
  column = 0;
  for (size_type i = 0; i < bytes; ++i) {
    char const c = data[i];
    if (c == '\t') {
      if (tabsize > 0) {
        size_type const spaces = tabsize - column % tabsize;
        std::memset(w, ' ', static_cast<std::size_t>(spaces));
        w += spaces;
        column += spaces;
      }
    } else {
      *w++ = c;
      if (!detail::is_continuation(c)) ++column;
      if (c == '\n' || c == '\r') column = 0;
    }
  }
  return out;
}

}  // namespace gpumem::strings
