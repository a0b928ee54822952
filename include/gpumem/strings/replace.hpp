// gpumem/strings/replace.hpp
//
// Python's str.replace on device strings.
//
//   using namespace gpumem::strings;
//   udf_string a = replace(s, "old", "new");      // s.replace("old", "new")
//   udf_string b = replace(s, ",", "", 2);        // s.replace(",", "", 2): the first two only
//   udf_string c = replace("abc", "", "-");       // "-a-b-c-": an empty `old` matches between
//                                                 // characters (and at both ends)
//
// Occurrences are non-overlapping, from the left; count < 0 replaces all, count == 0 none. The
// result is a new string even where nothing changes (Python would return the argument itself),
// made with one allocation of its exact size after one counting pass.
//
// Errors: a result past INT64_MAX bytes or an exhausted heap: a failed udf_string with
// errc::out_of_memory. The heap is the one nrt::launch made current; the arguments are only read.
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

GPUMEM_HD inline char* put_bytes(char* out, char const* p, size_type n) {
  if (n > 0) std::memcpy(out, p, static_cast<std::size_t>(n));
  return out + n;
}

// An empty `old`: `new_` before each of the first n characters (n may be length + 1: the end too).
GPUMEM_HD inline udf_string insert_between(string_view s, string_view new_, size_type limit) {
  udf_string out;
  size_type const len = s.length();
  size_type const n = limit <= len ? limit : len + 1;
  size_type total = 0;
  if (!checked_mul(new_.size_bytes(), n, total) || !checked_add(total, s.size_bytes(), total)) {
    detail::fail_oversized(out);
    return out;
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  char* w = out.data();
  size_type at = 0;  // byte of s
  for (size_type k = 0; k < n; ++k) {
    w = put_bytes(w, new_.data(), new_.size_bytes());
    if (at < s.size_bytes()) {
      size_type const next = s.advance(at, 1);
      w = put_bytes(w, s.data() + at, next - at);
      at = next;
    }
  }
  put_bytes(w, s.data() + at, s.size_bytes() - at);
  return out;
}

}  // namespace detail

// s.replace(old, new_, count).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string replace(string_view s, string_view old,
                                                            string_view new_,
                                                            size_type count = -1) {
  size_type const limit = count < 0 ? detail::size_type_max : count;
  if (old.empty()) return detail::insert_between(s, new_, limit);
  udf_string out;
  char const* const data = s.data();
  size_type const bytes = s.size_bytes();
  size_type const m = old.size_bytes();
  // Pass 1: how many occurrences will be replaced.
  size_type n = 0;
  for (size_type pos = 0; n < limit;) {
    size_type const at = detail::find_bytes(data + pos, bytes - pos, old.data(), m);
    if (at < 0) break;
    ++n;
    pos += at + m;
  }
  // n * m <= bytes, so only the growth can pass INT64_MAX.
  size_type total = 0;
  if (!detail::checked_mul(n, new_.size_bytes(), total) ||
      !detail::checked_add(total, bytes - n * m, total)) {
    detail::fail_oversized(out);
    return out;
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  // Pass 2: copy, replacing the same n occurrences.
  char* w = out.data();
  size_type pos = 0;
  for (size_type k = 0; k < n; ++k) {
    size_type const at = detail::find_bytes(data + pos, bytes - pos, old.data(), m);
    w = detail::put_bytes(w, data + pos, at);
    w = detail::put_bytes(w, new_.data(), new_.size_bytes());
    pos += at + m;
  }
  detail::put_bytes(w, data + pos, bytes - pos);
  return out;
}

}  // namespace gpumem::strings
