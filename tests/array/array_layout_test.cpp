// Shapes, strides, slicing and reshaping of array_layout (pure host logic).
#include <gpumem/array/array_layout.hpp>
#include <gpumem/core/error.hpp>

#include "array_test_support.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace gpumem {
namespace {

using test::expect_logic_error;

TEST(array_layout, contiguous_strides_in_both_orders) {
  auto c = array_layout::contiguous({2, 3, 4}, 8);
  EXPECT_EQ(c.strides_vector(), (strides_type{96, 32, 8}));
  EXPECT_TRUE(c.is_c_contiguous());
  EXPECT_FALSE(c.is_f_contiguous());
  auto f = array_layout::contiguous({2, 3, 4}, 8, array_order::fortran);
  EXPECT_EQ(f.strides_vector(), (strides_type{8, 16, 48}));
  EXPECT_TRUE(f.is_f_contiguous());
  EXPECT_EQ(f.natural_order(), array_order::fortran);
  EXPECT_EQ(c.size(), 24u);
  EXPECT_EQ(c.nbytes(), 192u);
}

TEST(array_layout, linear_offsets_follow_c_order) {
  auto f = array_layout::contiguous({2, 3}, 4, array_order::fortran);
  // C-order element 1 is (0, 1): offset 1 * 8 in Fortran order.
  EXPECT_EQ(f.offset_of_linear(1), 8);
  EXPECT_EQ(f.offset_of_linear(3), 4);  // (1, 0)
  std::size_t const index[] = {1, 2};
  EXPECT_EQ(f.offset_of(index), 4 + 16);
}

TEST(array_layout, bad_shape_and_strides_name_the_value) {
  expect_logic_error([] { array_layout::contiguous(shape_type(9, 1), 4); }, "rank 9");
  expect_logic_error([] { array_layout::contiguous({std::size_t(-3), 2}, 4); }, "shape[0]");
  expect_logic_error(
      [] {
        array_layout::contiguous({std::size_t(1) << 40, std::size_t(1) << 40}, 8);
      },
      "exceed the address space");
  expect_logic_error([] { array_layout::strided({2, 3}, {12, 6}, 4); }, "strides[1] = 6");
  expect_logic_error([] { array_layout::strided({2, 3}, {12}, 4); }, "1 strides for shape (2, 3)");
}

// Steps and strides at the ends of ptrdiff_t: a step as long as the dimension or longer takes one
// element (the count used to be computed as length + step - 1, which wraps), and PTRDIFF_MIN,
// which has no magnitude, is refused by value.
TEST(array_layout, huge_steps_and_strides_neither_wrap_nor_overflow) {
  constexpr std::ptrdiff_t most = std::numeric_limits<std::ptrdiff_t>::max();
  constexpr std::ptrdiff_t least = std::numeric_limits<std::ptrdiff_t>::min();
  auto l = array_layout::contiguous({10, 4}, 8);
  auto forward = l.sliced({slice{3, 10, most}});
  EXPECT_EQ(forward.layout.shape[0], 1u);
  EXPECT_EQ(forward.byte_offset, 3 * 32);
  auto backward = l.sliced({slice{0, 10, -most}});
  EXPECT_EQ(backward.layout.shape[0], 1u);
  EXPECT_EQ(backward.byte_offset, 9 * 32);
  auto two = l.sliced({slice{0, 10, 9}});
  EXPECT_EQ(two.layout.shape[0], 2u);
  EXPECT_EQ(two.layout.strides[0], 9 * 32);
  expect_logic_error([&] { (void)l.sliced({slice{0, 10, least}}); }, "no magnitude");
  expect_logic_error([] { array_layout::strided({2}, {least}, 8); }, "no magnitude");
  expect_logic_error([] { array_layout::contiguous({2}, ~std::size_t{0}); },
                     "itemsize 18446744073709551615");
}

TEST(array_layout, slices_select_the_right_elements) {
  auto l = array_layout::contiguous({4, 6}, 4);
  auto s = l.sliced({slice{1, 3}, slice{0, 6, 2}});
  EXPECT_EQ(s.layout.shape_vector(), (shape_type{2, 3}));
  EXPECT_EQ(s.layout.strides_vector(), (strides_type{24, 8}));
  EXPECT_EQ(s.byte_offset, 24);
  EXPECT_FALSE(s.layout.is_contiguous());

  auto r = l.sliced({slice::all(), slice{1, 5, -1}});  // columns 4, 3, 2, 1
  EXPECT_EQ(r.layout.shape[1], 4u);
  EXPECT_EQ(r.layout.strides[1], -4);
  EXPECT_EQ(r.byte_offset, 16);
  auto e = r.layout.extent();
  EXPECT_EQ(e.lowest, -12);
  EXPECT_EQ(e.highest, 3 * 24 + 4);

  auto r2 = l.sliced({slice{0, 4, -3}});  // rows 3, 0
  EXPECT_EQ(r2.layout.shape[0], 2u);
  EXPECT_EQ(r2.byte_offset, 3 * 24);
  EXPECT_EQ(r2.layout.strides[0], -72);
}

TEST(array_layout, out_of_range_slices_throw) {
  auto l = array_layout::contiguous({4, 6}, 4);
  expect_logic_error(
      [&] {
        l.sliced({slice{0, 5}});
      },
      "out-of-range slice [0, 5) step 1 of dimension 0 (length 4)");
  expect_logic_error([&] { l.sliced({slice{3, 2}}); }, "out-of-range slice [3, 2)");
  expect_logic_error([&] { l.sliced({slice::all(), slice{-1, 2}}); }, "dimension 1");
  expect_logic_error([&] { l.sliced({slice{0, 2, 0}}); }, "step is 0");
  expect_logic_error(
      [&] {
        l.sliced({slice{}, slice{}, slice{}});
      },
      "3 slices for an array of rank 2");
  expect_logic_error([&] { l.selected(1, 6); }, "index 6 out of range for dimension 1 of length 6");
}

TEST(array_layout, empty_slices_are_empty) {
  auto l = array_layout::contiguous({4, 6}, 4);
  auto s = l.sliced({slice{2, 2}});
  EXPECT_EQ(s.layout.size(), 0u);
  EXPECT_EQ(s.byte_offset, 0);
  EXPECT_TRUE(s.layout.is_c_contiguous());
}

// Empty slices at the end of dimensions whose strides reach almost the whole address space: their
// start times the stride, summed over the dimensions, used to be formed before the empty result's
// offset was reset to 0, overflowing ptrdiff_t (UBSan: signed integer overflow).
TEST(array_layout, empty_slices_at_the_end_of_huge_strides_do_not_overflow) {
  constexpr std::ptrdiff_t stride = (std::ptrdiff_t{1} << 62) - 1;  // the most strided() accepts
  auto l = array_layout::strided({2, 2}, {stride, stride}, 1);
  auto forward = l.sliced({slice{2, 2}, slice{2, 2}});
  EXPECT_EQ(forward.layout.size(), 0u);
  EXPECT_EQ(forward.byte_offset, 0);
  auto backward = l.sliced({slice{2, 2, -1}, slice{2, 2, -1}});
  EXPECT_EQ(backward.layout.size(), 0u);
  EXPECT_EQ(backward.byte_offset, 0);
  auto reversed = array_layout::strided({2, 2}, {-stride, -stride}, 1);
  EXPECT_EQ(reversed.sliced({slice{2, 2}, slice{2, 2}}).byte_offset, 0);
  auto partly = l.sliced({slice{1, 2}, slice{2, 2}});  // one dimension empty is enough
  EXPECT_EQ(partly.layout.size(), 0u);
  EXPECT_EQ(partly.byte_offset, 0);
  auto full = l.sliced({slice{1, 2}, slice{1, 2, -1}});
  EXPECT_EQ(full.byte_offset, 2 * stride);
}

// Empty shapes are checked as others: NumPy's np.empty((0, 2**62, 2**62)) is "array is too big",
// and an empty array's strides may reach no further than those of a full one (its slices compute
// offsets and strides from them). These overflowed signed arithmetic (UBSan) and were accepted.
TEST(array_layout, empty_shapes_are_checked_as_full_ones) {
  std::size_t const big = std::size_t(1) << 62;
  expect_logic_error(
      [&] {
        array_layout::contiguous({0, big, big}, 8);
      },
      "bad shape (0, 4611686018427387904, 4611686018427387904): the array would "
      "exceed the address space");
  expect_logic_error(
      [&] {
        array_layout::contiguous({big, 4, 0}, 8, array_order::fortran);
      },
      "bad shape (4611686018427387904, 4, 0)");
  expect_logic_error(
      [] {
        array_layout::strided({0, 4}, {8, std::ptrdiff_t(1) << 62}, 8);
      },
      "strides[1] = 4611686018427387904 overflows for shape (0, 4)");
  // Within the limits, an empty layout has the strides of a full one, and its slices are empty,
  // at offset 0.
  auto const e = array_layout::contiguous({0, 3, 4}, 8);
  EXPECT_EQ(e.strides_vector(), (strides_type{96, 32, 8}));
  EXPECT_EQ(e.size(), 0u);
  auto const s = array_layout::strided({0, 4}, {8, 16}, 8).sliced({slice{0, 0}, slice{0, 4, 2}});
  EXPECT_EQ(s.layout.shape_vector(), (shape_type{0, 2}));
  EXPECT_EQ(s.layout.strides_vector(), (strides_type{8, 32}));
  EXPECT_EQ(s.byte_offset, 0);
}

TEST(array_layout, reshape_needs_contiguity_and_the_same_count) {
  auto l = array_layout::contiguous({4, 6}, 4);
  auto r = l.reshaped({3, 8});
  EXPECT_EQ(r.strides_vector(), (strides_type{32, 4}));
  expect_logic_error([&] { l.reshaped({5, 5}); }, "to shape (5, 5) (25 elements)");
  auto cols = l.sliced({slice::all(), slice{0, 3}});
  expect_logic_error([&] { cols.layout.reshaped({12}); }, "non-contiguous");
  auto f = array_layout::contiguous({4, 6}, 4, array_order::fortran);
  expect_logic_error([&] { f.reshaped({24}); }, "in C order");
  EXPECT_EQ(f.reshaped({24}, array_order::fortran).shape[0], 24u);
}

TEST(array_layout, select_drops_a_dimension) {
  auto l = array_layout::contiguous({4, 6, 2}, 8);
  auto s = l.selected(1, 5);
  EXPECT_EQ(s.layout.shape_vector(), (shape_type{4, 2}));
  EXPECT_EQ(s.layout.strides_vector(), (strides_type{96, 8}));
  EXPECT_EQ(s.byte_offset, 5 * 16);
}

}  // namespace
}  // namespace gpumem
