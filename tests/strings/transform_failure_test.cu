// strings::transform when something fails: an exhausted heap, a UDF that goes on from a failed
// allocation or an oversized string, errors pending on a given memory system, a result the UDF
// freed, and a UDF's own errors; each reported by the call, with nothing leaked. Runs on both
// backends.
#include "transform_test_support.hpp"

#include <gpumem/strings/case.hpp>
#include <gpumem/strings/combine.hpp>
#include <gpumem/strings/managed_string.hpp>

#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::strings::string_view;
using gpumem::strings::udf_result;
using gpumem::strings::udf_string;
using gpumem::test::identity;
using gpumem::test::rows_t;
using gpumem::test::spec_udf;  // (s.upper() if len(s) > 2 else s + s) + "abc"
using gpumem::test::transform_test;

struct big_copy {  // allocates 64 KiB per row: exhausts a small heap
  GPUMEM_HD udf_result operator()(string_view s) const {
    udf_string r(1 << 16, U'x');
    r += s;
    return r;
  }
};

struct value_error_udf {
  GPUMEM_HD udf_result operator()(string_view s) const {
    if (s.size_bytes() == 2) return udf_result::failed(gpumem::strings::errc::value_error);
    return s;
  }
};

TEST_F(transform_test, exhausted_heap_throws_out_of_memory_then_works) {
  gpumem::nrt::memsys small(gpumem::nrt::heap_options{2 * gpumem::MiB},
                            gpumem::nrt::memsys_options{true});
  std::vector<std::string> in(256, "row");
  column const c = gpumem::strings_column_from_host(in);
  gpumem::strings::transform_options o;
  o.memsys = &small;
  try {
    (void)gpumem::strings::transform(c, big_copy{}, o);
    FAIL() << "no out_of_memory";
  } catch (gpumem::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("of 256 rows could not allocate"), std::string::npos) << what;
    EXPECT_NE(what.find("heap of"), std::string::npos) << what;
  }
  expect_balanced(small);  // the failures were cleared
  // The same memory system serves the next call.
  column const out = gpumem::strings::transform(c, spec_udf{}, o);
  EXPECT_EQ(out.to_host_strings(), rows_t(256, std::string("ROWabc")));
  expect_balanced(small);
  small.heap().trim();
  EXPECT_EQ(small.heap().usage().used_bytes, 0u);
}

// A UDF that goes on from a failed allocation: upper() fails, the failed string reads as empty,
// and `+ "!"` makes "!" — a row with no error that is wrong. The heap's record fails the call.
struct swallowing_udf {
  GPUMEM_HD udf_result operator()(string_view s) const { return upper(s) + "!"; }
};

TEST_F(transform_test, a_failure_the_udf_went_on_from_fails_the_call) {
  gpumem::nrt::memsys small(gpumem::nrt::heap_options{2 * gpumem::MiB},
                            gpumem::nrt::memsys_options{true});
  column const c = gpumem::strings_column_from_host(
      std::vector<std::string>{"ok", std::string(4 * gpumem::MiB, 'x')});
  gpumem::strings::transform_options o;
  o.memsys = &small;
  try {
    (void)gpumem::strings::transform(c, swallowing_udf{}, o);
    FAIL() << "a row made from a failed allocation came back without an error";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("inside the UDF failed"), std::string::npos) << e.what();
  }
  expect_balanced(small);
}

// The same with a size past INT64_MAX instead of an exhausted heap: the failed string allocates
// nothing, yet the heap records it (SIZE_MAX bytes), so the call fails instead of returning rows
// built from empty strings.
struct oversized_udf {
  GPUMEM_HD udf_result operator()(string_view s) const {
    udf_string huge =
        gpumem::strings::repeat(s, gpumem::strings::size_type{1} << 62);  // past INT64_MAX bytes
    udf_string r = s + huge;  // the failed string reads as empty
    return r;
  }
};

TEST_F(transform_test, a_size_past_int64_max_the_udf_went_on_from_fails_the_call) {
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"ab", "xyz"});
  try {
    (void)gpumem::strings::transform(c, oversized_udf{});
    FAIL() << "rows made from an oversized string came back without an error";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("inside the UDF failed"), std::string::npos) << e.what();
    EXPECT_EQ(e.requested_bytes(), ~std::size_t{0}) << e.what();
  }
}

// Errors the caller's memory system held before the call are reported by the call, not hidden.
struct failing_reserve {  // a kernel of the caller's whose allocation fails
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    udf_string u;
    u.reserve(8 * 1024 * 1024);
  }
};

TEST_F(transform_test, a_given_memsys_with_pending_errors_reports_them_first) {
  gpumem::nrt::memsys small(gpumem::nrt::heap_options{2 * gpumem::MiB},
                            gpumem::nrt::memsys_options{true});
  gpumem::strings::transform_options o;
  o.memsys = &small;
  // A kernel of the caller's whose allocation failed, not checked yet.
  gpumem::nrt::launch(small, {1, 1}, failing_reserve{});
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"ab"});
  EXPECT_THROW((void)gpumem::strings::transform(c, spec_udf{}, o), gpumem::out_of_memory);
  column const out = gpumem::strings::transform(c, spec_udf{}, o);  // reported once, then clean
  EXPECT_EQ(out.to_host_strings(), (rows_t{"abababc"}));
}

struct releases_its_result {  // drops the only reference of the string it returns
  GPUMEM_HD udf_result operator()(string_view s) const {
    gpumem::strings::managed_string m = gpumem::strings::make_managed_string(s + s);
    gpumem::strings::managed_string alias = m;  // a copied handle takes no reference
    alias.release();                            // the count goes to 0: the string is freed
    return m;
  }
};

TEST_F(transform_test, a_result_the_udf_freed_fails_that_call) {
  column const in = gpumem::strings_column_from_host(std::vector<std::string>{"ab", "cde"});
  EXPECT_THROW((void)gpumem::strings::transform(in, releases_its_result{}), gpumem::logic_error);
  try {
    (void)gpumem::strings::transform(in, releases_its_result{}, with_memsys());
    FAIL() << "no logic_error";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("freed before it was gathered"), std::string::npos)
        << e.what();
  }
  // Reported by that call: the next one on the same memory system is not blamed.
  column const out = gpumem::strings::transform(in, identity{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"ab", "cde"}));
}

TEST_F(transform_test, other_errors_are_logic_errors) {
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"a", "bb", "ccc"});
  EXPECT_THROW(gpumem::strings::transform(c, value_error_udf{}, with_memsys()),
               gpumem::logic_error);
  expect_balanced();
}

}  // namespace
