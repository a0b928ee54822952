// Copies between overlapping views of one array give NumPy's result (the source as it was before
// the copy), synchronous or on a stream, for device and host-accessible memory, strided or dense.
#include "array_test_support.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/array/transfer.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace gpumem {
namespace {

std::vector<int> iota(std::size_t n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(overlap_copy, reversed_source_over_its_own_range) {
  auto a = to_device(iota(8));
  copy(a.slice({slice{0, 4, 1}}), a.slice({slice{0, 4, -1}}));  // a[0:4] = a[3::-1]
  EXPECT_EQ(a.copy_to_host(), (std::vector<int>{3, 2, 1, 0, 4, 5, 6, 7}));
}

TEST(overlap_copy, strided_shift_by_one_step) {
  auto b = to_device(iota(8));
  copy(b.slice({slice{2, 8, 2}}), b.slice({slice{0, 6, 2}}));  // b[2::2] = b[0:6:2]
  EXPECT_EQ(b.copy_to_host(), (std::vector<int>{0, 1, 0, 3, 2, 5, 4, 7}));
}

TEST(overlap_copy, dense_shifts_both_ways) {
  // Dense on both sides: one byte copy per direction, which must not be a plain memcpy.
  std::size_t const n = 4096;
  auto up = to_device(iota(n));
  copy(up.slice({slice{1, static_cast<std::ptrdiff_t>(n)}}),
       up.slice({slice{0, static_cast<std::ptrdiff_t>(n) - 1}}));
  auto back = up.copy_to_host();
  EXPECT_EQ(back[0], 0);
  for (std::size_t i = 1; i < n; ++i)
    ASSERT_EQ(back[i], static_cast<int>(i) - 1) << i;
  auto down = to_device(iota(n));
  copy(down.slice({slice{0, static_cast<std::ptrdiff_t>(n) - 1}}),
       down.slice({slice{1, static_cast<std::ptrdiff_t>(n)}}));
  back = down.copy_to_host();
  for (std::size_t i = 0; i + 1 < n; ++i)
    ASSERT_EQ(back[i], static_cast<int>(i) + 1) << i;
  EXPECT_EQ(back[n - 1], static_cast<int>(n) - 1);
}

TEST(overlap_copy, transpose_in_place_on_a_stream) {
  // m = m.T for a square matrix: every element but the diagonal is read from where another is
  // written. Asynchronous: the temporary must live until the stream has passed both copies.
  auto m = to_device(iota(16), {4, 4});
  auto s = stream::create();
  // The transpose as a strided view: shape (4, 4), strides swapped.
  auto t = device_array<int>(m.owner(), {4, 4}, {4, 16});
  copy(m, t, s);
  s.synchronize();
  auto back = m.copy_to_host();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(back[i * 4 + j], j * 4 + i) << i << "," << j;
}

TEST(overlap_copy, pinned_and_managed_memory) {
  pinned_array<int> p({8});
  managed_array<int> g({8});
  for (int i = 0; i < 8; ++i)
    p(i) = g(i) = i;
  copy(p.slice({slice{0, 4}}), p.slice({slice{0, 4, -1}}));
  EXPECT_EQ(p.to_vector(), (std::vector<int>{3, 2, 1, 0, 4, 5, 6, 7}));
  auto s = stream::create();
  copy(g.slice({slice{2, 8, 2}}), g.slice({slice{0, 6, 2}}), s);
  s.synchronize();
  EXPECT_EQ(g.to_vector(), (std::vector<int>{0, 1, 0, 3, 2, 5, 4, 7}));
}

TEST(overlap_copy, a_view_copied_onto_itself_is_unchanged) {
  auto a = to_device(iota(8));
  copy(a.slice({slice{1, 7, 2}}), a.slice({slice{1, 7, 2}}));
  EXPECT_EQ(a.copy_to_host(), iota(8));
}

TEST(overlap_copy, shape_mismatch_names_the_callers_layouts) {
  auto a = to_device(iota(8));
  test::expect_logic_error(
      [&] {
        copy(a.slice({slice{0, 4}}), a.slice({slice{1, 6}}));
      },
      "destination shape (4,), strides (4,) bytes, itemsize 4, source shape "
      "(5,), strides (4,) bytes");
}

}  // namespace
}  // namespace gpumem
