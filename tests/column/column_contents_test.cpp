// Columns taken apart and put back together (release() and column(contents)), what the contents
// constructor checks of a strings column before a device view could read out of bounds, deep
// copies of strings columns of no rows, and self-move-assignment.
#include "column_test_support.hpp"

#include <gpumem/column/column.hpp>
#include <gpumem/column/detail/strings_column.hpp>
#include <gpumem/column/null_mask.hpp>
#include <gpumem/column/strings_column.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

using rows_type = std::vector<std::optional<std::string>>;

// A strings column with int32 offsets, or int64 ones when `wide`.
column strings(rows_type const& rows, bool wide) {
  return detail::strings_column_from_host(rows, buffer_memory::device,
                                          wide ? 0 : max_int32_offset_bytes);
}

TEST(column_copy, a_strings_column_of_no_rows_copies_for_either_offset_type) {
  for (type_id offset_type : {type_id::int32, type_id::int64}) {
    // make_strings_column's empty column: no offsets at all.
    column const empty = make_strings_column(0, buffer(), offset_type, buffer());
    for (column const& c : {empty, empty.slice(0, 0)}) {
      column const d = c.copy();
      EXPECT_EQ(d.type(), type_id::string);
      EXPECT_EQ(d.size(), 0u);
      ASSERT_EQ(d.children().size(), 1u);
      EXPECT_EQ(d.child(0).type(), offset_type);
      EXPECT_TRUE(d.to_host_strings().empty());
    }
  }
  // Empty slices of columns with rows, nullable or not, at every position.
  for (bool wide : {false, true}) {
    column const c = strings({"ab", std::nullopt, "cde"}, wide);
    column const plain = strings_column_from_host(std::vector<std::string>{"ab", "", "cde"});
    for (std::size_t at = 0; at <= 3; ++at) {
      for (column const* source : {&c, &plain}) {
        column const d = source->slice(at, at).copy();
        EXPECT_EQ(d.size(), 0u) << "at " << at;
        EXPECT_TRUE(d.to_host_strings().empty());
        column const again(column(d).release());  // still a valid strings column
        EXPECT_EQ(again.size(), 0u);
      }
    }
  }
}

TEST(column_contents, a_strings_column_round_trips_through_its_contents) {
  column c = strings({"do", std::nullopt, "you", "", "cheese?"}, false);
  column const back(c.slice(1, 4).release());
  EXPECT_EQ(back.to_host_strings(), (rows_type{std::nullopt, "you", ""}));
  column wide = strings({"a", "bc"}, true);
  column const wide_back(wide.release());
  EXPECT_EQ(wide_back.to_host_strings(), (rows_type{"a", "bc"}));
}

TEST(column_contents, strings_rows_beyond_the_offsets_are_refused) {
  column c = strings({"ab", "cde"}, false);  // 3 offsets, 5 characters
  column::contents parts = column(c).release();
  parts.size = 1000;
  parts.offset = 1u << 20;
  test::expect_logic_error([&] { column{std::move(parts)}; },
                           "column: the offsets child has 3 entries, rows [1048576, 1049576) "
                           "need 1049577");
  parts = column(c).release();
  parts.size = 3;
  test::expect_logic_error([&] { column{std::move(parts)}; },
                           "column: the offsets child has 3 entries, rows [0, 3) need 4");
  parts = column(c).release();
  parts.offset = 1;
  parts.size = 2;
  test::expect_logic_error([&] { column{std::move(parts)}; },
                           "column: the offsets child has 3 entries, rows [1, 3) need 4");
  parts = column(c).release();
  parts.offset = std::numeric_limits<std::size_t>::max();
  parts.size = 1;
  test::expect_logic_error([&] { column{std::move(parts)}; }, "overflow");
}

TEST(column_contents, a_strings_column_needs_exactly_its_offsets_child) {
  column::contents none;
  none.type = type_id::string;
  none.size = 4;
  test::expect_logic_error([&] { column{std::move(none)}; },
                           "column: a strings column has 1 child (its offsets), not 0");
  column::contents empty;  // even without rows: every strings column has its offsets child
  empty.type = type_id::string;
  test::expect_logic_error([&] { column{std::move(empty)}; }, "not 0");
  column::contents two = strings({"x"}, false).release();
  two.children.push_back(two.children.front());
  test::expect_logic_error([&] { column{std::move(two)}; }, "not 2");
  column::contents floats = strings({"x"}, false).release();
  std::vector<float> const f{0.0f, 1.0f};
  floats.children.front() = column::from_host(f);
  test::expect_logic_error([&] { column{std::move(floats)}; },
                           "column: strings offsets must be int32 or int64, not float32");
}

TEST(column_contents, a_fixed_width_column_has_no_children_and_offsets_no_mask) {
  // A child of a fixed-width column would be dropped by every copy; a mask on strings offsets is
  // read by nothing (Arrow's offsets are never null).
  column::contents ints = column::from_host(std::vector<std::int32_t>{1, 2}).release();
  ints.children.push_back(strings({"x"}, false));
  test::expect_logic_error([&] { column{std::move(ints)}; },
                           "column: a int32 column has no children, not 1");
  column::contents masked = strings({"ab", "c"}, false).release();
  column::contents offsets = masked.children.front().release();
  offsets.null_mask = buffer(64);
  masked.children.front() = column(std::move(offsets));
  test::expect_logic_error([&] { column{std::move(masked)}; },
                           "column: strings offsets have no null mask");
}

TEST(column_copy, a_copy_of_no_rows_of_a_nullable_column_has_no_buffers) {
  std::vector<std::optional<std::int64_t>> rows(40, std::int64_t{7});
  rows.back() = std::nullopt;
  column const c = column::from_host(rows);
  ASSERT_TRUE(c.nullable());
  for (std::size_t at : {0u, 5u, 37u, 40u}) {
    column const d = c.slice(at, at).copy();
    EXPECT_EQ(d.size(), 0u) << at;
    EXPECT_EQ(d.data().size(), 0u) << at;
    EXPECT_FALSE(d.nullable()) << at;
  }
}

TEST(column_contents, strings_offsets_and_mask_are_checked_over_the_rows) {
  std::vector<std::int32_t> const bad{0, 2, 1, 9};  // row 1 ends before it starts; 9 > 5 chars
  buffer const chars = buffer::from_host("abcde", 5);
  auto with_offsets = [&](std::size_t offset, std::size_t size) {
    column::contents parts;
    parts.type = type_id::string;
    parts.offset = offset;
    parts.size = size;
    parts.data = chars;
    parts.children.push_back(column::from_host(bad));
    return parts;
  };
  // Rows [0, 1) read offsets 0 and 2: fine, although the later ones are bad.
  EXPECT_EQ(column(with_offsets(0, 1)).to_host_strings(), (rows_type{"ab"}));
  test::expect_logic_error([&] { column{with_offsets(1, 1)}; },
                           "column: end of row 1 (1) is below the offset of row 1 (2)");
  test::expect_logic_error([&] { column{with_offsets(2, 1)}; },
                           "column: end of row 2 (9) is past the 5 bytes of characters");
  std::vector<std::int32_t> const negative{-1, 2};
  column::contents parts = with_offsets(0, 1);
  parts.children.front() = column::from_host(negative);
  test::expect_logic_error([&] { column{std::move(parts)}; },
                           "column: offset of row 0 (-1) is negative");
  // The mask must cover offset + size rows.
  column::contents masked = strings(test::random_strings(40, 3, 0.3, 7), false).release();
  masked.null_mask = masked.null_mask.slice(0, 4);  // 32 rows
  test::expect_logic_error([&] { column{std::move(masked)}; },
                           "column: the null mask has 4 bytes, 40 rows need 8");
}

TEST(column_move, self_move_assignment_keeps_the_column) {
  column c = strings({"ab", std::nullopt, "cde"}, false);
  column& alias = c;
  c = std::move(alias);
  EXPECT_EQ(c.size(), 3u);
  ASSERT_EQ(c.children().size(), 1u);
  EXPECT_EQ(c.to_host_strings(), (rows_type{"ab", std::nullopt, "cde"}));
  column n = column::from_host(std::vector<std::optional<int>>{1, std::nullopt});
  column& n_alias = n;
  n = std::move(n_alias);
  EXPECT_EQ(n.null_count(), 1u);
  EXPECT_EQ(n.to_host<int>(), (std::vector<std::optional<int>>{1, std::nullopt}));
}

}  // namespace
}  // namespace gpumem
