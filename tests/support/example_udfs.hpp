// String UDFs shared by the tests and the benchmarks (bench/ includes this file by its path), so
// that the workload a benchmark measures is the one the tests check. Device code: include it from
// .cu files (nvcc in CUDA builds, C++ in host-only builds).
//
// Test support, not API: a UDF is its user's own code, and gpumem's API is what a UDF is built
// from (strings/). The examples write their UDFs out in full (examples/string_udf.cu has the same
// spec_udf), because an example is read to learn how a UDF is written and must build against an
// installed gpumem alone.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/case.hpp>
#include <gpumem/strings/combine.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/udf_result.hpp>
#include <gpumem/strings/udf_string.hpp>

namespace gpumem::test {

// The UDF of cuDF's string-UDF design notes (README.md, docs/strings.md), as the Python reads:
//
//   (s.upper() if len(s) > 2 else s + s) + "abc"
//
// "abc" is appended in place (no copy of the result).
struct spec_udf {
  GPUMEM_HD strings::udf_result operator()(strings::string_view s) const {
    strings::udf_string result = s.length() > 2 ? strings::upper(s) : s + s;
    result += "abc";
    return result;
  }
};

// s.upper() + "!": one managed string per row, whatever its length.
struct shout {
  GPUMEM_HD strings::udf_result operator()(strings::string_view s) const {
    strings::udf_string result = strings::upper(s);
    result += "!";
    return result;
  }
};

}  // namespace gpumem::test
