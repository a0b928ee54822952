// GPUMEM_ASSERT where asserts are on: this file turns them on whatever the build type.
#define GPUMEM_ENABLE_ASSERTS 1
#include <gpumem/core/assert.hpp>

#include <gtest/gtest.h>

static_assert(GPUMEM_ASSERTS_ON, "GPUMEM_ENABLE_ASSERTS turns the asserts on");

namespace {

TEST(asserts_on, a_true_condition_is_evaluated_once_and_passes) {
  int evaluations = 0;
  GPUMEM_ASSERT(++evaluations == 1, "evaluated once");
  EXPECT_EQ(evaluations, 1);
}

TEST(asserts_on, a_false_condition_aborts_naming_file_line_condition_and_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the host backend may have started threads
  int const blocks = 3;
  EXPECT_DEATH(GPUMEM_ASSERT(blocks == 4, "the cover counts every block"),
               "assert_test\\.cpp:[0-9]+: gpumem internal assertion failed: blocks == 4: the "
               "cover counts every block");
}

}  // namespace
