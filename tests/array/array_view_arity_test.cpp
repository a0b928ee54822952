// array_view::operator() takes exactly one index per dimension. With fewer it used to read past
// its list of indices (a stack array sized by the call); now the list is max_array_rank long and
// a count other than the rank trips GPUMEM_ASSERT, which this file turns on.
#ifndef GPUMEM_ENABLE_ASSERTS
#define GPUMEM_ENABLE_ASSERTS 1
#endif

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/array_view.hpp>
#include <gpumem/core/assert.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

static_assert(GPUMEM_ASSERTS_ON, "this file needs the asserts on");

namespace gpumem {
namespace {

// An element type of this file alone: array_view<cell>'s members are instantiated here, with the
// asserts on, so no other translation unit's instantiation (asserts off) can stand in for them.
struct cell {
  int value;
};

TEST(array_view_arity, one_index_per_dimension_or_the_assert_fires) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<cell> cells(24);
  for (int i = 0; i < 24; ++i)
    cells[i].value = i;
  array_view<cell> const v(cells.data(), array_layout::contiguous({2, 3, 4}, sizeof(cell)));
  EXPECT_EQ(v(1, 2, 3).value, 23);
  EXPECT_EQ(v(0, 1, 0).value, 4);
  // A death test re-runs this executable; under compute-sanitizer that second process is
  // instrumented too and outlasts the sanitizer run's time limit.
  if (std::getenv("GPUMEM_UNDER_SANITIZER") != nullptr)
    GTEST_SKIP() << "death tests (a second process) under compute-sanitizer";
  EXPECT_DEATH((void)v(1), "one index per dimension");
  EXPECT_DEATH((void)v(1, 2), "one index per dimension");
  EXPECT_DEATH((void)v(1, 2, 3, 0), "one index per dimension");
}

}  // namespace
}  // namespace gpumem
