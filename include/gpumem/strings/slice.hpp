// gpumem/strings/slice.hpp
//
// Python's indexing and slicing of str on device strings, in characters (code points).
//
//   using namespace gpumem::strings;
//   result<string_view> c = at(s, -1);             // s[-1]; index_error when out of range
//   string_view mid = slice_view(s, 2, -2);        // s[2:-2]: a view, no new bytes
//   string_view tail = slice_view(s, 3, none);     // s[3:]
//   udf_string r = slice(s, none, none, -1);       // s[::-1]: a new string
//   udf_string odd = slice(s, 1, none, 2);         // s[1::2]
//
// Bounds are slice_bound values: a number (negative counts from the end; out-of-range values are
// clamped as CPython's PySlice_AdjustIndices does) or `none` for an omitted one. Any int64 is a
// valid bound or step: nothing wraps.
//
// Errors: at() gives index_error outside [-length, length); slice() with step 0 gives a failed
// udf_string with value_error (Python's ValueError), and out_of_memory when the heap is exhausted.
// slice() makes one allocation: the exact size for ASCII text and step 1, otherwise the smaller of
// 4 bytes a character and the argument's size. The arguments are only read; views live as long
// as the argument's bytes.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/text_scan.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>
#include <gpumem/strings/utf8.hpp>

#include <cstring>

namespace gpumem::strings {

// A slice bound: a number, or omitted (`none`), as in s[start:stop:step].
struct slice_bound {
  size_type value = 0;
  bool given = false;
  constexpr slice_bound() = default;
  GPUMEM_HD constexpr slice_bound(size_type v) : value(v), given(true) {}
};

// The omitted bound (Python's None in a slice).
inline constexpr slice_bound none{};

namespace detail {

// CPython's PySlice_Unpack + PySlice_AdjustIndices: normalises start and stop for a string of
// `len` characters and returns the number of characters the slice takes.
GPUMEM_HD inline size_type adjust_slice(size_type len, slice_bound start_bound,
                                        slice_bound stop_bound, size_type step, size_type& start,
                                        size_type& stop) {
  start = start_bound.given ? start_bound.value : (step < 0 ? size_type_max : 0);
  stop = stop_bound.given ? stop_bound.value : (step < 0 ? INT64_MIN : size_type_max);
  auto clamp = [&](size_type& v) {
    if (v < 0) {
      v += len;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= len) {
      v = step < 0 ? len - 1 : len;
    }
  };
  clamp(start);
  clamp(stop);
  if (step < 0) return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
  return start < stop ? (stop - start - 1) / step + 1 : 0;
}

}  // namespace detail

// s[i] as a view of its one character; index_error outside [-length, length).
GPUMEM_HD inline result<string_view> at(string_view s, size_type i) {
  char const* const data = s.data();
  size_type const bytes = s.size_bytes();
  if (i >= 0) {
    size_type const begin = s.byte_offset(i);
    if (begin >= bytes) return {string_view(), errc::index_error};
    return {string_view(data + begin, s.advance(begin, 1) - begin), errc::ok};
  }
  // From the end, one character at a time: no length needed, and -i never computed (INT64_MIN).
  size_type pos = bytes;
  size_type end = bytes;
  for (size_type k = -1; k >= i; --k) {
    if (pos == 0) return {string_view(), errc::index_error};
    end = pos;
    detail::decode_backward(data, pos);
  }
  return {string_view(data + pos, end - pos), errc::ok};
}

// s[start:stop] (step 1) as a view.
GPUMEM_HD inline string_view slice_view(string_view s, slice_bound start, slice_bound stop) {
  size_type first = start.given ? start.value : 0;
  size_type last = stop.given ? stop.value : detail::size_type_max;
  if (first < 0 || last < 0) {  // negative bounds need the length; others clamp by themselves
    size_type const len = s.length();
    detail::adjust_slice(len, start, stop, 1, first, last);
  }
  if (last <= first) return string_view(s.data(), 0);
  size_type const begin = s.byte_offset(first);
  size_type const end = s.advance(begin, last - first);
  return string_view(s.data() + begin, end - begin);
}

// s[start:stop:step] as a new string; step 0 is value_error.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string slice(string_view s, slice_bound start,
                                                          slice_bound stop,
                                                          slice_bound step = none) {
  udf_string out;
  size_type step_value = step.given ? step.value : 1;
  if (step_value == 0) {
    out.set_error(errc::value_error);
    return out;
  }
  if (step_value == 1) {
    string_view const v = slice_view(s, start, stop);
    if (!v.empty() && out.resize_bytes(v.size_bytes()))
      std::memcpy(out.data(), v.data(), static_cast<std::size_t>(v.size_bytes()));
    return out;
  }
  if (step_value < -detail::size_type_max) step_value = -detail::size_type_max;  // as CPython
  size_type const len = s.length();
  bool const ascii = len == s.size_bytes();
  size_type first = 0, last = 0;
  size_type const n = detail::adjust_slice(len, start, stop, step_value, first, last);
  if (n == 0) return out;
  char const* const data = s.data();
  if (ascii) {  // bytes are characters: the exact size, one byte each
    if (!out.resize_bytes(n)) return out;
    char* const w = out.data();
    for (size_type k = 0; k < n; ++k)
      w[k] = data[first + k * step_value];  // |k * step| < length: no wrap
    return out;
  }
  // No character of the result is longer than 4 bytes, nor all of them longer than s.
  if (!out.reserve(n <= s.size_bytes() / 4 ? 4 * n : s.size_bytes())) return out;
  size_type pos = detail::byte_of(s, first, false);
  for (size_type k = 0;;) {
    size_type const next = s.advance(pos, 1);
    out.append(data + pos, next - pos);
    if (++k == n) break;
    if (step_value > 0) {
      pos = s.advance(pos, step_value);
    } else {
      for (size_type back = step_value; back < 0 && pos > 0; ++back)
        detail::decode_backward(data, pos);
    }
  }
  return out;
}

}  // namespace gpumem::strings
