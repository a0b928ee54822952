// range_index (never a column) and column-backed indexes.
#include <expect_error.hpp>

#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/index.hpp>
#include <gpumem/frame/range_index.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpumem::frame::index;
using gpumem::frame::range_index;
using gpumem::test::expect_logic_error;

TEST(range_index, sizes_values_slices) {
  range_index const r(10, 20, 2);
  EXPECT_EQ(r.size(), 5u);
  EXPECT_EQ(r.value(0), 10);
  EXPECT_EQ(r.value(4), 18);
  range_index const s = r.slice(1, 3);
  EXPECT_EQ(s.start(), 12);
  EXPECT_EQ(s.stop(), 16);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(range_index(5).size(), 5u);
  EXPECT_EQ(range_index(0, 10, 3).size(), 4u);   // 0 3 6 9
  EXPECT_EQ(range_index(10, 0, -3).size(), 4u);  // 10 7 4 1
  EXPECT_EQ(range_index(10, 0, -3).value(3), 1);
  EXPECT_EQ(range_index(5, 5).size(), 0u);
  EXPECT_EQ(range_index(5, 1).size(), 0u);
  auto const big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(range_index(-big, big, big).size(), 2u);  // the span does not fit int64
  EXPECT_TRUE(range_index(3) == range_index(0, 3, 1));
  expect_logic_error([] { range_index(0, 5, 0); }, "the step must not be 0");
  expect_logic_error([&] { (void)r.value(5); }, "position 5 is past the 5 labels");
  expect_logic_error([&] { (void)r.slice(2, 6); }, "[2, 6) is outside the 5 labels");
  auto const materialised = r.to_column().to_host<std::int64_t>();
  EXPECT_EQ(materialised, (std::vector<std::optional<std::int64_t>>{10, 12, 14, 16, 18}));
}

// Slices of ranges that end near the int64 limits: start + end * step does not fit int64, and a
// wrapped stop used to give an empty slice of a range whose rows were there.
TEST(range_index, slices_near_the_int64_limits) {
  auto const big = std::numeric_limits<std::int64_t>::max();
  auto const low = std::numeric_limits<std::int64_t>::min();
  range_index const up(big - 2, big, 3);  // one label: big - 2
  ASSERT_EQ(up.size(), 1u);
  range_index const one = up.slice(0, 1);
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(one.value(0), big - 2);
  EXPECT_EQ(one.stop(), big);  // big - 2 + 3 does not fit: the limit, past the label all the same
  EXPECT_EQ(up.slice(1, 1).size(), 0u);
  EXPECT_EQ(up.slice(0, 0).size(), 0u);

  range_index const down(low + 2, low, -3);  // one label: low + 2
  EXPECT_EQ(down.slice(0, 1).size(), 1u);
  EXPECT_EQ(down.slice(0, 1).value(0), low + 2);
  EXPECT_EQ(down.slice(0, 1).stop(), low);

  range_index const wide(-big, big, big);  // -big, 0
  EXPECT_EQ(wide.slice(0, 2).size(), 2u);
  EXPECT_EQ(wide.slice(1, 2).value(0), 0);
  EXPECT_EQ(wide.slice(0, 1).value(0), -big);

  range_index const to_the_top(big - 10, big, 1);  // big - 10 ... big - 1
  range_index const tail = to_the_top.slice(7, 10);
  EXPECT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail.value(2), big - 1);
  EXPECT_EQ(tail.stop(), big);
  EXPECT_EQ(index(up).format(0, 1), (std::vector<std::string>{std::to_string(big - 2)}));

  // More labels than any allocation holds: refused by count (it was std::length_error).
  expect_logic_error([&] { (void)range_index(low, big).to_column(); },
                     "range_index::to_column: 18446744073709551615 labels of 8 bytes exceed");
  expect_logic_error([&] { (void)range_index(low, big, 4).to_column(); },
                     "4611686018427387904 labels");
}

TEST(index, range_and_column_kinds) {
  index const a(range_index(3));
  EXPECT_TRUE(a.is_range());
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.format(0, 3), (std::vector<std::string>{"0", "1", "2"}));
  expect_logic_error([&] { (void)a.labels(); }, "the index is a range_index");

  auto const names =
      gpumem::strings_column_from_host({std::string("x"), std::nullopt, std::string("z")});
  index const b(names);
  EXPECT_FALSE(b.is_range());
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.format(1, 3), (std::vector<std::string>{"<NA>", "z"}));
  expect_logic_error([&] { (void)b.range(); }, "the index is a column of labels");
  index const tail = b.slice(1, 3);
  EXPECT_TRUE(tail.labels().data().owns_same_memory(names.data()));
  index const deep = b.copy(true);
  // A deep copy shares a strings column's immutable characters, not its offsets.
  EXPECT_TRUE(deep.labels().data().owns_same_memory(names.data()));
  EXPECT_FALSE(deep.labels().child(0).data().owns_same_memory(names.child(0).data()));
  EXPECT_EQ(deep.labels().to_host_strings(), names.to_host_strings());
  EXPECT_TRUE(b.copy(false).labels().data().owns_same_memory(names.data()));
  EXPECT_EQ(a.slice(1, 2).range().start(), 1);
  EXPECT_EQ(a.to_column().to_host<std::int64_t>().size(), 3u);
}

}  // namespace
