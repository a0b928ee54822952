// Shared helpers of the nrt tests: the fixture that checks, after every test, that the memory
// system reported nothing and that its statistics balance (device scratch: nrt_test_support.hpp).
#pragma once

#include <gpumem/core/units.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <gtest/gtest.h>

#include "nrt_test_support.hpp"

#include <memory>

namespace gpumem::test {

// Every test gets its own memory system with statistics on; TearDown asserts that the kernels
// recorded no error and that alloc == free and mi_alloc == mi_free.
class nrt_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ms_ = std::make_unique<nrt::memsys>(nrt::heap_options{64 * MiB}, nrt::memsys_options{true});
  }
  void TearDown() override {
    expect_memsys_balanced(*ms_);
    ms_->heap().trim();
    EXPECT_EQ(ms_->heap().usage().used_bytes, 0u) << "slabs still held after trim()";
    ms_.reset();
  }
  nrt::memsys& ms() { return *ms_; }

 private:
  std::unique_ptr<nrt::memsys> ms_;
};

}  // namespace gpumem::test
