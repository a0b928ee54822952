// gpumem/strings/types.hpp
//
// The vocabulary every device string function shares: the signed size type (Python indices may
// be negative), the sentinels `npos` and `end_of_string`, the error codes that stand for the
// exceptions Python would raise, and `result<T>` for functions that return a value or raise.
//
//   strings::result<strings::size_type> r = strings::index(s, sub);   // (search.hpp)
//   if (!r.ok()) { /* r.error == errc::value_error: "substring not found" */ }
//
// Device code never throws: functions that raise in Python return a result<T> (or, when they
// build a string, a failed udf_string) carrying the errc; the caller decides what to report.
// Everything here is a plain value, usable in kernels and on the host (GPUMEM_HD).
//
// GPUMEM_STRINGS_NOINLINE keeps the slow paths of the strings layer (heap allocation, growth,
// freeing) out of line, on the device (__noinline__) and on the host, so that kernels calling many
// string functions compile quickly and their hot paths stay small.
#pragma once

#include <gpumem/core/config.hpp>

#include <cstdint>

#if defined(__CUDACC__)
#define GPUMEM_STRINGS_NOINLINE __noinline__
#elif defined(__GNUC__)
#define GPUMEM_STRINGS_NOINLINE __attribute__((noinline))
#else
#define GPUMEM_STRINGS_NOINLINE
#endif

namespace gpumem::strings {

// Sizes, positions and indices, in characters (code points) unless a name says bytes.
using size_type = std::int64_t;

// "Not found" (find, rfind) and "to the end" for counts (string_view::substr).
inline constexpr size_type npos = -1;

// The default `end` argument of the search functions: Python's omitted end.
inline constexpr size_type end_of_string = INT64_MAX;

// What a function would have raised in Python. out_of_memory is also what a failed device heap
// allocation gives (MemoryError).
enum class errc : std::uint8_t { ok, out_of_memory, value_error, index_error, overflow_error };

// The Python exception name of `e` ("ok" for errc::ok, "unknown" for a value outside the enum).
GPUMEM_HD inline char const* errc_name(errc e) {
  switch (e) {
    case errc::ok:
      return "ok";
    case errc::out_of_memory:
      return "MemoryError";
    case errc::value_error:
      return "ValueError";
    case errc::index_error:
      return "IndexError";
    case errc::overflow_error:
      return "OverflowError";
  }
  return "unknown";
}

// A value, or the error Python would have raised (then `value` is T{}).
template <class T>
struct result {
  T value{};
  errc error = errc::ok;
  GPUMEM_HD bool ok() const { return error == errc::ok; }
};

}  // namespace gpumem::strings
