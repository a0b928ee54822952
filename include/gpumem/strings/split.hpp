// gpumem/strings/split.hpp
//
// Python's str.split, str.rsplit, str.partition and str.rpartition on device strings. The parts
// are views of the argument (Python's parts need no new bytes): they live as long as its bytes.
//
//   using namespace gpumem::strings;
//   string_list parts = split(s, ",");          // s.split(","); parts.failed() on error
//   string_list words = split(s);               // s.split(): runs of whitespace, none empty
//   string_list last2 = rsplit(s, ",", 1);      // s.rsplit(",", 1)
//   partition_result p = partition(s, "=");     // s.partition("="): p.head, p.sep, p.tail
//
// maxsplit < 0 is "no limit", as in Python. With a separator, empty parts are kept and an empty
// string gives [""]; without one (split(s), split_whitespace), whitespace is what str.isspace says
// (unicode::is_space), runs of it separate, and an all-whitespace string gives [].
//
// Errors: an empty separator is Python's ValueError: the list (or partition_result::error) is
// value_error. The list's storage comes from the NRT heap (code run by nrt::launch); when it runs
// out the list is out_of_memory. Everything is GPUMEM_HD; the arguments are only read.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_list.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/unicode.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings {

// What partition and rpartition give: head + sep + tail is the argument; all three are views of
// it. `error` is value_error for an empty separator (then all three are empty).
struct partition_result {
  string_view head;
  string_view sep;
  string_view tail;
  errc error = errc::ok;
  GPUMEM_HD bool ok() const { return error == errc::ok; }
};

namespace detail {

GPUMEM_HD inline string_view bytes_of(string_view s, size_type begin, size_type end) {
  return string_view(s.data() + begin, end - begin);
}

GPUMEM_HD inline size_type split_limit(size_type maxsplit) {
  return maxsplit < 0 ? size_type_max : maxsplit;
}

// Forward over whitespace (skip_space) or over everything else, from byte i; returns the new i.
GPUMEM_HD inline size_type skip_forward(string_view s, size_type i, bool skip_space) {
  while (i < s.size_bytes()) {
    char32_t c = 0;
    int const used = utf8::decode(s.data() + i, s.size_bytes() - i, c);
    if (unicode::is_space(c) != skip_space) break;
    i += used;
  }
  return i;
}

// Backward over whitespace or non-whitespace ending at byte i (exclusive); returns the new i.
GPUMEM_HD inline size_type skip_backward(string_view s, size_type i, bool skip_space) {
  while (i > 0) {
    size_type at = i;
    if (unicode::is_space(decode_backward(s.data(), at)) != skip_space) break;
    i = at;
  }
  return i;
}

// CPython's split_whitespace over s[from:], into `out`.
GPUMEM_HD inline void split_whitespace_into(string_list& out, string_view s, size_type from,
                                            size_type limit) {
  size_type i = from;
  size_type const n = s.size_bytes();
  while (limit-- > 0) {
    i = skip_forward(s, i, true);
    if (i == n) return;
    size_type const token = i;
    i = skip_forward(s, i, false);
    out.push_back(bytes_of(s, token, i));
    if (out.failed()) return;
  }
  // The limit was reached: the rest, without its leading whitespace, is one more part.
  i = skip_forward(s, i, true);
  if (i != n) out.push_back(bytes_of(s, i, n));
}

}  // namespace detail

// s.split(None, maxsplit): parts separated by runs of whitespace, none empty.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline string_list split_whitespace(string_view s,
                                                                      size_type maxsplit = -1) {
  string_list out;
  detail::split_whitespace_into(out, s, 0, detail::split_limit(maxsplit));
  return out;
}

// s.split().
GPUMEM_HD inline string_list split(string_view s) {
  return split_whitespace(s, -1);
}

// s.split(sep, maxsplit).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline string_list split(string_view s, string_view sep,
                                                           size_type maxsplit = -1) {
  string_list out;
  if (sep.empty()) {
    out.set_error(errc::value_error);
    return out;
  }
  size_type limit = detail::split_limit(maxsplit);
  size_type pos = 0;
  size_type const n = s.size_bytes();
  while (limit-- > 0) {
    size_type const at = detail::find_bytes(s.data() + pos, n - pos, sep.data(), sep.size_bytes());
    if (at < 0) break;
    out.push_back(detail::bytes_of(s, pos, pos + at));
    if (out.failed()) return out;
    pos += at + sep.size_bytes();
  }
  out.push_back(detail::bytes_of(s, pos, n));
  return out;
}

// s.rsplit(None, maxsplit): as split_whitespace, the limit counted from the right.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline string_list rsplit_whitespace(string_view s,
                                                                       size_type maxsplit = -1) {
  string_list out;
  // The parts are the same words as split's; only where the unsplit head ends depends on the
  // direction. Find it from the right, then emit left to right.
  size_type limit = detail::split_limit(maxsplit);
  size_type i = s.size_bytes();
  while (limit-- > 0) {
    i = detail::skip_backward(s, i, true);
    if (i == 0) break;
    i = detail::skip_backward(s, i, false);
  }
  size_type const head_end = detail::skip_backward(s, i, true);
  if (head_end > 0) {
    out.push_back(detail::bytes_of(s, 0, head_end));
    if (out.failed()) return out;
  }
  detail::split_whitespace_into(out, s, i, detail::size_type_max);
  return out;
}

// s.rsplit().
GPUMEM_HD inline string_list rsplit(string_view s) {
  return rsplit_whitespace(s, -1);
}

// s.rsplit(sep, maxsplit): separators matched from the right ("aaa".rsplit("aa") is ["a", ""]).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline string_list rsplit(string_view s, string_view sep,
                                                            size_type maxsplit = -1) {
  string_list out;
  if (sep.empty()) {
    out.set_error(errc::value_error);
    return out;
  }
  // From the right the parts come last first: push them so, then reverse the list in place.
  size_type limit = detail::split_limit(maxsplit);
  size_type end = s.size_bytes();
  while (limit-- > 0) {
    size_type const at = detail::rfind_bytes(s.data(), end, sep.data(), sep.size_bytes());
    if (at < 0) break;
    out.push_back(detail::bytes_of(s, at + sep.size_bytes(), end));
    if (out.failed()) return out;
    end = at;
  }
  out.push_back(detail::bytes_of(s, 0, end));
  if (out.failed()) return out;
  for (size_type i = 0, j = out.size() - 1; i < j; ++i, --j) {
    string_view const swap = out[i];
    out[i] = out[j];
    out[j] = swap;
  }
  return out;
}

// s.partition(sep): (head, sep, tail) around the first sep; (s, "", "") when there is none.
GPUMEM_HD inline partition_result partition(string_view s, string_view sep) {
  partition_result r;
  if (sep.empty()) {
    r.error = errc::value_error;
    return r;
  }
  size_type const at = detail::find_bytes(s.data(), s.size_bytes(), sep.data(), sep.size_bytes());
  if (at < 0) {
    r.head = s;
    r.sep = r.tail = detail::bytes_of(s, s.size_bytes(), s.size_bytes());
    return r;
  }
  size_type const after = at + sep.size_bytes();
  r.head = detail::bytes_of(s, 0, at);
  r.sep = detail::bytes_of(s, at, after);
  r.tail = detail::bytes_of(s, after, s.size_bytes());
  return r;
}

// s.rpartition(sep): around the last sep; ("", "", s) when there is none.
GPUMEM_HD inline partition_result rpartition(string_view s, string_view sep) {
  partition_result r;
  if (sep.empty()) {
    r.error = errc::value_error;
    return r;
  }
  size_type const at = detail::rfind_bytes(s.data(), s.size_bytes(), sep.data(), sep.size_bytes());
  if (at < 0) {
    r.head = r.sep = detail::bytes_of(s, 0, 0);
    r.tail = s;
    return r;
  }
  size_type const after = at + sep.size_bytes();
  r.head = detail::bytes_of(s, 0, at);
  r.sep = detail::bytes_of(s, at, after);
  r.tail = detail::bytes_of(s, after, s.size_bytes());
  return r;
}

}  // namespace gpumem::strings
