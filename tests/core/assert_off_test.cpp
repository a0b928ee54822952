// GPUMEM_ASSERT where asserts are off (a release build that is not validating): the condition is
// not evaluated. This file turns them off whatever the build type.
#undef GPUMEM_ENABLE_ASSERTS
#undef GPUMEM_VALIDATE
#ifndef NDEBUG
#define NDEBUG
#endif
#include <gpumem/core/assert.hpp>

#include <gtest/gtest.h>

static_assert(!GPUMEM_ASSERTS_ON, "NDEBUG without GPUMEM_ENABLE_ASSERTS turns the asserts off");

namespace {

TEST(asserts_off, the_condition_is_not_evaluated) {
  int evaluations = 0;
  GPUMEM_ASSERT(++evaluations == 5, "never evaluated, never fails");
  EXPECT_EQ(evaluations, 0);
}

}  // namespace
