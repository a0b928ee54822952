// The fixture and UDFs shared by the strings::transform tests (transform_test.cu,
// transform_failure_test.cu): a checked 64 MiB memory system per test, balanced after every call.
#pragma once

#include <example_udfs.hpp>

#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/strings/transform.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::test {

using rows_t = std::vector<std::optional<std::string>>;

struct identity {
  GPUMEM_HD strings::udf_result operator()(strings::string_view s) const { return s; }
};

class transform_test : public ::testing::Test {
 protected:
  void SetUp() override {
    ms_ = std::make_unique<nrt::memsys>(gpumem::nrt::heap_options{64 * gpumem::MiB},
                                        gpumem::nrt::memsys_options{true});
  }
  // After every call: no error pending and nothing left allocated in the memory system (the
  // test's own, or another the test made).
  static void expect_balanced(nrt::memsys& ms) {
    EXPECT_NO_THROW(ms.check());
    nrt::memsys_statistics const s = ms.statistics();
    EXPECT_EQ(s.alloc, s.free);
    EXPECT_EQ(s.mi_alloc, s.mi_free);
  }
  void expect_balanced() { expect_balanced(*ms_); }
  gpumem::strings::transform_options with_memsys() {
    gpumem::strings::transform_options o;
    o.memsys = ms_.get();
    o.report = &report_;
    return o;
  }
  std::unique_ptr<gpumem::nrt::memsys> ms_;
  gpumem::strings::transform_report report_;
};

}  // namespace gpumem::test
