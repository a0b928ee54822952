// gpumem/strings/search.hpp
//
// Python's str searching on device strings: find, rfind, index, rindex, count, `in`, startswith
// and endswith, with CPython's start/end rules (negative values count from the end, out-of-range
// values are clamped; a start past the end finds nothing, not even the empty string).
//
//   using namespace gpumem::strings;
//   size_type i = find(s, "ab");             // s.find("ab"): a character index, or -1
//   size_type j = rfind(s, "ab", 2, -1);     // s.rfind("ab", 2, -1)
//   result<size_type> k = index(s, "ab");    // s.index("ab"): value_error when absent
//   bool b = startswith(s, "ab", 1);         // s.startswith("ab", 1)
//   string_view options[] = {"a", "b"};
//   bool t = endswith(s, options, 2);        // s.endswith(("a", "b"))
//
// Positions and lengths are in characters (code points), as in Python; `end_of_string` is an
// omitted `end`. Everything is GPUMEM_HD (device code, and host code on the host backend),
// allocates nothing, never fails except index/rindex (value_error when Python raises ValueError)
// and is safe to call from any number of threads (the arguments are read only). Results follow
// Python on valid UTF-8; invalid UTF-8 gives some answer without reading out of bounds.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings {

namespace detail {

// The byte window of s[start:end] after CPython's normalisation, and what find needs of it.
struct search_window {
  size_type start = 0;  // characters, normalised
  size_type end = 0;
  size_type begin_byte = 0;
  size_type end_byte = 0;
  bool ascii = false;
  bool empty_result = false;  // end - start < the needle's length: nothing can be found
};

GPUMEM_HD inline search_window window_of(string_view s, size_type start, size_type end,
                                         size_type needle_chars) {
  search_window w;
  size_type const len = s.length();
  w.ascii = len == s.size_bytes();
  adjust_indices(start, end, len);
  w.start = start;
  w.end = end;
  // start may be past len (end is not), so end - start cannot wrap.
  if (end - start < needle_chars) {
    w.empty_result = true;
    return w;
  }
  w.begin_byte = byte_of(s, start, w.ascii);
  w.end_byte =
      w.ascii ? end
              : w.begin_byte + string_view(s.data() + w.begin_byte, s.size_bytes() - w.begin_byte)
                                   .byte_offset(end - start);
  return w;
}

// The character index of byte `pos` of the window.
GPUMEM_HD inline size_type window_char(string_view s, search_window const& w, size_type pos) {
  return w.start + (w.ascii ? pos : utf8::count_characters(s.data() + w.begin_byte, pos));
}

// Whether start/end cover the whole string without counting its characters (lengths in
// characters never exceed lengths in bytes).
GPUMEM_HD inline bool whole_string(string_view s, size_type start, size_type end) {
  return start == 0 && end >= s.size_bytes();
}

GPUMEM_HD inline bool tail_match(string_view s, string_view affix, size_type start, size_type end,
                                 bool at_end) {
  if (whole_string(s, start, end)) {
    if (affix.size_bytes() > s.size_bytes()) return false;
    char const* const at = at_end ? s.data() + s.size_bytes() - affix.size_bytes() : s.data();
    return bytes_equal(at, affix.data(), affix.size_bytes());
  }
  size_type const len = s.length();
  bool const ascii = len == s.size_bytes();
  adjust_indices(start, end, len);
  size_type const affix_chars = affix.length();
  if (end - affix_chars < start) return false;
  if (affix_chars == 0) return true;
  // A byte match of a valid affix spans exactly affix_chars characters, so it stays in [start,
  // end).
  if (at_end) {
    size_type const stop = byte_of(s, end, ascii);
    return stop >= affix.size_bytes() &&
           bytes_equal(s.data() + stop - affix.size_bytes(), affix.data(), affix.size_bytes());
  }
  size_type const from = byte_of(s, start, ascii);
  return s.size_bytes() - from >= affix.size_bytes() &&
         bytes_equal(s.data() + from, affix.data(), affix.size_bytes());
}

}  // namespace detail

// s.find(sub, start, end): the lowest character index of sub in s[start:end], or -1.
GPUMEM_HD inline size_type find(string_view s, string_view sub, size_type start = 0,
                                size_type end = end_of_string) {
  if (detail::whole_string(s, start, end)) {
    size_type const pos =
        detail::find_bytes(s.data(), s.size_bytes(), sub.data(), sub.size_bytes());
    return pos < 0 ? npos : utf8::count_characters(s.data(), pos);
  }
  detail::search_window const w = detail::window_of(s, start, end, sub.length());
  if (w.empty_result) return npos;
  size_type const pos = detail::find_bytes(s.data() + w.begin_byte, w.end_byte - w.begin_byte,
                                           sub.data(), sub.size_bytes());
  return pos < 0 ? npos : detail::window_char(s, w, pos);
}

// s.rfind(sub, start, end): the highest character index of sub in s[start:end], or -1.
GPUMEM_HD inline size_type rfind(string_view s, string_view sub, size_type start = 0,
                                 size_type end = end_of_string) {
  if (detail::whole_string(s, start, end)) {
    size_type const pos =
        detail::rfind_bytes(s.data(), s.size_bytes(), sub.data(), sub.size_bytes());
    return pos < 0 ? npos : utf8::count_characters(s.data(), pos);
  }
  detail::search_window const w = detail::window_of(s, start, end, sub.length());
  if (w.empty_result) return npos;
  size_type const pos = detail::rfind_bytes(s.data() + w.begin_byte, w.end_byte - w.begin_byte,
                                            sub.data(), sub.size_bytes());
  return pos < 0 ? npos : detail::window_char(s, w, pos);
}

// s.index(sub, start, end): find, with value_error where find gives -1.
GPUMEM_HD inline result<size_type> index(string_view s, string_view sub, size_type start = 0,
                                         size_type end = end_of_string) {
  size_type const at = find(s, sub, start, end);
  if (at < 0) return {npos, errc::value_error};
  return {at, errc::ok};
}

GPUMEM_HD inline result<size_type> rindex(string_view s, string_view sub, size_type start = 0,
                                          size_type end = end_of_string) {
  size_type const at = rfind(s, sub, start, end);
  if (at < 0) return {npos, errc::value_error};
  return {at, errc::ok};
}

// s.count(sub, start, end): non-overlapping occurrences in s[start:end]; an empty sub counts the
// end - start + 1 places between characters.
GPUMEM_HD inline size_type count(string_view s, string_view sub, size_type start = 0,
                                 size_type end = end_of_string) {
  char const* p = s.data();
  size_type left = s.size_bytes();
  if (!detail::whole_string(s, start, end) || sub.empty()) {
    detail::search_window const w = detail::window_of(s, start, end, sub.length());
    if (w.empty_result) return 0;
    if (sub.empty()) return w.end - w.start + 1;
    p += w.begin_byte;
    left = w.end_byte - w.begin_byte;
  }
  size_type n = 0;
  for (;;) {
    size_type const pos = detail::find_bytes(p, left, sub.data(), sub.size_bytes());
    if (pos < 0) return n;
    ++n;
    p += pos + sub.size_bytes();
    left -= pos + sub.size_bytes();
  }
}

// `sub in s`.
GPUMEM_HD inline bool contains(string_view s, string_view sub) {
  return detail::find_bytes(s.data(), s.size_bytes(), sub.data(), sub.size_bytes()) >= 0;
}

// s.startswith(prefix, start, end).
GPUMEM_HD inline bool startswith(string_view s, string_view prefix, size_type start = 0,
                                 size_type end = end_of_string) {
  return detail::tail_match(s, prefix, start, end, false);
}

// s.startswith((prefixes[0], ..., prefixes[n - 1]), start, end): any of them (false for n <= 0).
GPUMEM_HD inline bool startswith(string_view s, string_view const* prefixes, int n,
                                 size_type start = 0, size_type end = end_of_string) {
  for (int i = 0; i < n; ++i)
    if (detail::tail_match(s, prefixes[i], start, end, false)) return true;
  return false;
}

// s.endswith(suffix, start, end).
GPUMEM_HD inline bool endswith(string_view s, string_view suffix, size_type start = 0,
                               size_type end = end_of_string) {
  return detail::tail_match(s, suffix, start, end, true);
}

GPUMEM_HD inline bool endswith(string_view s, string_view const* suffixes, int n,
                               size_type start = 0, size_type end = end_of_string) {
  for (int i = 0; i < n; ++i)
    if (detail::tail_match(s, suffixes[i], start, end, true)) return true;
  return false;
}

}  // namespace gpumem::strings
