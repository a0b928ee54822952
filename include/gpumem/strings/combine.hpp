// gpumem/strings/combine.hpp
//
// New strings from several: Python's `a + b`, `s * n` and `sep.join(parts)` on device strings.
//
//   using namespace gpumem::strings;
//   udf_string ab = a + b;                          // or concat(a, b)
//   udf_string line = repeat("-", 40);              // "-" * 40
//   string_view parts[] = {"x", "y", "z"};
//   udf_string csv = join(",", parts, 3);           // ",".join(["x", "y", "z"])
//   udf_string words = join(" ", split(s));         // " ".join(s.split())  (string_list)
//   if (csv.failed()) { /* csv.error() == errc::out_of_memory */ }
//
// Each result is built with one allocation of its exact size (the sizes are known before any byte
// is copied). Errors: a size past INT64_MAX (a huge repeat count) or an exhausted heap gives a
// failed udf_string with errc::out_of_memory, never a wrapped size; Python raises MemoryError or
// OverflowError there. repeat with n <= 0, and joining no parts, give an empty string without
// allocating. The heap is the one nrt::launch made current; the arguments are only read.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_list.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <cstring>

namespace gpumem::strings {

namespace detail {

// Appends `part` at byte `at` of a buffer sized for it; returns the byte after it.
GPUMEM_HD inline size_type put(char* out, size_type at, string_view part) {
  if (part.size_bytes() > 0)
    std::memcpy(out + at, part.data(), static_cast<std::size_t>(part.size_bytes()));
  return at + part.size_bytes();
}

// sep.join over parts given by an accessor (an array or a string_list).
template <class Parts>
GPUMEM_HD udf_string join_parts(string_view sep, Parts const& parts, size_type n) {
  udf_string out;
  if (n <= 0) return out;
  size_type total = 0;
  if (!checked_mul(sep.size_bytes(), n - 1, total)) {
    detail::fail_oversized(out);
    return out;
  }
  for (size_type i = 0; i < n; ++i) {
    if (!checked_add(total, parts[i].size_bytes(), total)) {
      detail::fail_oversized(out);
      return out;
    }
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  size_type at = put(out.data(), 0, parts[0]);
  for (size_type i = 1; i < n; ++i)
    at = put(out.data(), put(out.data(), at, sep), parts[i]);
  return out;
}

}  // namespace detail

// a + b.
GPUMEM_HD inline udf_string concat(string_view a, string_view b) {
  udf_string out;
  size_type total = 0;
  if (!detail::checked_add(a.size_bytes(), b.size_bytes(), total)) {
    detail::fail_oversized(out);
    return out;
  }
  if (total == 0 || !out.resize_bytes(total)) return out;
  detail::put(out.data(), detail::put(out.data(), 0, a), b);
  return out;
}

GPUMEM_HD inline udf_string operator+(string_view a, string_view b) {
  return concat(a, b);
}

// s * n: empty for n <= 0 (and for an empty s, whatever n is).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string repeat(string_view s, size_type n) {
  udf_string out;
  if (n <= 0 || s.empty()) return out;
  size_type total = 0;
  if (!detail::checked_mul(s.size_bytes(), n, total)) {
    detail::fail_oversized(out);
    return out;
  }
  if (!out.resize_bytes(total)) return out;
  char* const p = out.data();
  // Copy the first copy, then double what is there: log2(n) copies of growing size.
  size_type done = detail::put(p, 0, s);
  while (done < total) {
    size_type const chunk = done <= total - done ? done : total - done;
    std::memcpy(p + done, p, static_cast<std::size_t>(chunk));
    done += chunk;
  }
  return out;
}

// sep.join(parts[0 .. n)).
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string join(string_view sep, string_view const* parts,
                                                         size_type n) {
  return detail::join_parts(sep, parts, n);
}

// sep.join(list); a failed list (a split that failed) gives a string failed with its error.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string join(string_view sep, string_list const& list) {
  if (list.failed()) {
    udf_string out;
    out.set_error(list.error());
    return out;
  }
  return detail::join_parts(sep, list, list.size());
}

}  // namespace gpumem::strings
