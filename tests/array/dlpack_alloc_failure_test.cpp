// from_dlpack when an allocation fails part-way through the import: std::bad_alloc reaches the
// caller and the tensor's deleter has not run, so the caller still owns the tensor as the header
// promises. The import used to create the owner that runs the deleter before wrapping the array;
// a failure while wrapping dropped it, ran the deleter, and then threw.
//
// This file replaces the global operator new of test_array: it fails the N-th allocation of the
// calling thread when a test arms it, and is malloc otherwise.
#include "array_test_support.hpp"
#include "replaced_new.hpp"

#include <gpumem/array/dlpack_interop.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace {

// Allocations of this thread still allowed before one fails; negative: never fail.
thread_local long allocations_before_failure = -1;

}  // namespace

// The N-th allocation of the arming thread fails, once.
bool gpumem::test::refuse_allocation() noexcept {
  if (allocations_before_failure == 0) {
    allocations_before_failure = -1;  // one failure per arming
    return true;
  }
  if (allocations_before_failure > 0) --allocations_before_failure;
  return false;
}

namespace gpumem {
namespace {

TEST(dlpack_alloc_failure, a_failed_import_never_runs_the_deleter) {
  if (!GPUMEM_TEST_OWN_NEW) GTEST_SKIP() << "a sanitizer owns operator new";
  auto d = to_device(std::vector<float>(16, 1.f));
  (void)current_context();
  // Fail the 1st, 2nd, ... allocation of the import until one import needs fewer.
  bool imported = false;
  for (long n = 0; n < 500 && !imported; ++n) {
    dlpack::DLManagedTensor* t = to_dlpack(d);
    ASSERT_EQ(d.use_count(), 2);
    allocations_before_failure = n;
    try {
      device_array<float> a = from_dlpack<float>(t);
      allocations_before_failure = -1;
      imported = true;
      EXPECT_EQ(a.copy_to_host(), std::vector<float>(16, 1.f));
    } catch (std::bad_alloc const&) {
      allocations_before_failure = -1;
      // The export's share of d is dropped by its deleter only.
      EXPECT_EQ(d.use_count(), 2) << "allocation " << n + 1
                                  << " failed: bad_alloc thrown after the deleter ran";
      if (d.use_count() == 2) t->deleter(t);  // still ours: release it
    }
  }
  EXPECT_TRUE(imported);
  EXPECT_EQ(d.use_count(), 1);  // the successful import's deleter ran with its array
}

}  // namespace
}  // namespace gpumem
