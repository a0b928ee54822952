// device_array: round trips for several element types, shapes, orders and slices; views keep
// their parent alive; zero-size arrays; bad input names the bad value.
#include "array_test_support.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

using test::expect_logic_error;

template <class T>
std::vector<T> iota_values(std::size_t n, int seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(rng() % 100);
  return v;
}

template <class T>
class device_array_round_trip : public ::testing::Test {};
using element_types =
    ::testing::Types<std::int8_t, std::uint16_t, std::int32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(device_array_round_trip, element_types);

TYPED_TEST(device_array_round_trip, shapes_and_orders) {
  using T = TypeParam;
  for (auto const& shape : {shape_type{7}, shape_type{3, 5}, shape_type{2, 3, 4}, shape_type{}}) {
    for (auto order : {array_order::c, array_order::fortran}) {
      std::size_t const n = array_layout::contiguous(shape, sizeof(T)).size();
      auto const host = iota_values<T>(n, static_cast<int>(n));
      auto d = to_device(host, shape, order);
      EXPECT_EQ(d.shape(), shape);
      EXPECT_EQ(order == array_order::c ? d.is_c_contiguous() : d.is_f_contiguous(), true);
      EXPECT_EQ(d.copy_to_host(), host) << to_string(shape);
    }
  }
}

TYPED_TEST(device_array_round_trip, strided_slices_match_a_host_model) {
  using T = TypeParam;
  // A 5 x 6 C-order array whose value at (i, j) is i * 6 + j.
  std::vector<T> host(30);
  std::iota(host.begin(), host.end(), T{0});
  auto d = to_device(host, {5, 6});
  auto part = d.slice({slice{1, 5, 2}, slice{0, 6, -2}});  // rows 1, 3; columns 5, 3, 1
  ASSERT_EQ(part.shape(), (shape_type{2, 3}));
  std::vector<T> expected;
  for (int i : {1, 3})
    for (int j : {5, 3, 1})
      expected.push_back(static_cast<T>(i * 6 + j));
  EXPECT_EQ(part.copy_to_host(), expected);

  // Writing through the slice changes exactly those elements of the parent.
  std::vector<T> const ones(6, T{1});
  part.copy_to_device(ones);
  auto all = d.copy_to_host();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j) {
      bool const in_slice = (i == 1 || i == 3) && (j % 2 == 1);
      EXPECT_EQ(all[i * 6 + j], in_slice ? T{1} : static_cast<T>(i * 6 + j)) << i << "," << j;
    }
}

TEST(device_array, fortran_host_buffer_is_column_major) {
  std::vector<int> host{1, 2, 3, 4, 5, 6};  // a 2 x 3 Fortran array: column (1, 2), (3, 4), ...
  auto d = to_device(host, {2, 3}, array_order::fortran);
  EXPECT_EQ(d.row(1).copy_to_host(), (std::vector<int>{2, 4, 6}));
  EXPECT_EQ(d.select(1, 2).copy_to_host(), (std::vector<int>{5, 6}));
}

TEST(device_array, device_to_device_between_layouts) {
  std::vector<double> host(24);
  std::iota(host.begin(), host.end(), 0.0);
  auto c = to_device(host, {4, 6});
  device_array<double> f({4, 6}, array_order::fortran);
  f.copy_to_device(c);
  auto back = f.copy_to_host();  // natural order of f is Fortran
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(back[j * 4 + i], host[i * 6 + j]);
  auto like = device_array_like(f);
  EXPECT_TRUE(like.is_f_contiguous());
  EXPECT_EQ(like.shape(), f.shape());
  like.copy_to_device(f.slice({}));
  EXPECT_EQ(like.copy_to_host(), back);
}

// Whether dst.copy_to_device(src) compiles.
template <class Dst, class Src, class = void>
struct can_copy_to_device : std::false_type {};
template <class Dst, class Src>
struct can_copy_to_device<
    Dst, Src,
    std::void_t<decltype(std::declval<Dst const&>().copy_to_device(std::declval<Src const&>()))>>
    : std::true_type {};

// copy_to_device from an array of another element type of the same size used to compile and copy
// the bits (an int32 1 read back as the float 1.4e-45); gpumem::copy refuses it at compile time.
TEST(device_array, copy_to_device_takes_arrays_of_its_element_type_only) {
  EXPECT_TRUE((can_copy_to_device<device_array<float>, device_array<float>>::value));
  EXPECT_TRUE((can_copy_to_device<device_array<float>, pinned_array<float>>::value));
  EXPECT_FALSE((can_copy_to_device<device_array<float>, device_array<std::int32_t>>::value));
  EXPECT_FALSE((can_copy_to_device<device_array<double>, pinned_array<std::int64_t>>::value));
}

TEST(device_array, views_share_and_keep_the_parent_alive) {
  test::tracked_device_buffer buffer(64 * sizeof(float));
  std::vector<float> host(64);
  std::iota(host.begin(), host.end(), 0.f);
  device_array<float> child;
  {
    auto parent = wrap_device_array(static_cast<float*>(buffer.ptr), {8, 8}, buffer.owner());
    parent.copy_to_device(host);
    EXPECT_EQ(parent.use_count(), 1);
    child = parent.slice({slice{2, 4}});
    EXPECT_EQ(parent.use_count(), 2);
    auto grandchild = child.row(1);
    EXPECT_EQ(parent.use_count(), 3);
  }
  EXPECT_EQ(child.use_count(), 1);
  EXPECT_FALSE(buffer.released->load()) << "the parent's memory was released under a live view";
  EXPECT_EQ(child.row(1).copy_to_host(), (std::vector<float>{24, 25, 26, 27, 28, 29, 30, 31}));
  child = device_array<float>();
  EXPECT_TRUE(buffer.released->load());
}

TEST(device_array, reshape_ravel_split) {
  std::vector<int> host(12);
  std::iota(host.begin(), host.end(), 0);
  auto d = to_device(host);
  auto m = d.reshape({3, 4});
  EXPECT_EQ(m.row(2).copy_to_host(), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(m.ravel().copy_to_host(), host);
  EXPECT_EQ(m.use_count(), 2);
  auto parts = d.split(5);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].copy_to_host(), (std::vector<int>{10, 11}));
  expect_logic_error([&] { m.slice({slice::all(), slice{0, 2}}).ravel(); }, "non-contiguous");
  expect_logic_error([&] { d.split(0); }, "section must be positive");
}

TEST(device_array, zero_size_arrays_allocate_nothing) {
  auto* manager = dynamic_cast<default_memory_manager*>(&current_context().memory_manager());
  std::size_t const before = manager ? manager->get_statistics().allocations : 0;
  device_array<float> empty({0, 3});
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.use_count(), 0);
  EXPECT_TRUE(empty.copy_to_host().empty());
  auto also_empty = to_device(std::vector<double>{});
  EXPECT_EQ(also_empty.size(), 0u);
  empty.copy_to_device(std::vector<float>{});
  EXPECT_EQ(empty.slice({slice{0, 0}}).size(), 0u);
  if (manager) {
    EXPECT_EQ(manager->get_statistics().allocations, before);
  }
  device_array<int> default_constructed;
  EXPECT_EQ(default_constructed.size(), 0u);
  EXPECT_EQ(default_constructed.ndim(), 1);
}

TEST(device_array, moving_leaves_the_source_empty) {
  auto a = to_device(std::vector<int>(16, 7), {4, 4});
  int* const memory = a.data();
  device_array<int> b = std::move(a);
  EXPECT_EQ(b.data(), memory);
  EXPECT_EQ(b.shape(), (shape_type{4, 4}));
  EXPECT_EQ(b.use_count(), 1);
  // The moved-from handle is a default array: it cannot reach the memory it gave away (which
  // the manager may hand to the next allocation once b is gone).
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.shape(), (shape_type{0}));
  EXPECT_TRUE(a.is_c_contiguous());
  EXPECT_EQ(a.use_count(), 0);
  EXPECT_EQ(a.owner().device_pointer(), nullptr);
  EXPECT_EQ(a.view().data(), nullptr);
  expect_logic_error([&] { a.copy_to_device(std::vector<int>(16, 1)); },
                     "the host buffer has 16 elements, the array (shape (0,)");

  device_array<int> c = to_device(std::vector<int>{1, 2});
  c = std::move(b);  // move assignment: c takes b's memory and drops its own
  EXPECT_EQ(c.data(), memory);
  EXPECT_EQ(c.use_count(), 1);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.use_count(), 0);
  EXPECT_EQ(c.copy_to_host(), std::vector<int>(16, 7));
  device_array<int>& same = a;
  a = std::move(same);  // self-move keeps a valid (empty) array
  EXPECT_EQ(a.size(), 0u);
}

TEST(device_array, bad_input_names_the_value) {
  device_array<int> d({4, 5});
  expect_logic_error([&] { d.copy_to_device(std::vector<int>(19)); },
                     "host buffer has 19 elements");
  std::vector<int> small(3);
  expect_logic_error([&] { d.copy_to_host(host_span<int>(small)); }, "shape (4, 5)");
  expect_logic_error([&] { d.slice({slice{0, 4}, slice{2, 6}}); }, "out-of-range slice [2, 6)");
  expect_logic_error([&] { d.copy_to_device(device_array<int>({5, 4})); }, "different shapes");
  expect_logic_error([&] { device_array<int>(shape_type(9, 1)); }, "rank 9");
  memory_pointer mem = current_context().memory_manager().memalloc(64);
  expect_logic_error([&] { device_array<int>(mem, {4, 5}); }, "outside the buffer of 64 bytes");
  expect_logic_error([&] { device_array<int>(mem, {2, 2}, {8, 6}); }, "strides[1] = 6");
  device_array<int> fits(mem, {4, 2}, {16, 4}, 8);  // reaches bytes [8, 64)
  EXPECT_EQ(fits.use_count(), 2);
  expect_logic_error(
      [&] {
        device_array<int>(mem, {4, 2}, {16, 4}, 12);
      },
      "reaches bytes [12, 68)");
  // Offsets near the top of size_t and ptrdiff_t: offset + extent used to overflow (signed) and
  // pass the check.
  for (std::size_t const offset :
       {static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()),
        static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - 4, ~std::size_t{0},
        ~std::size_t{0} - 7}) {
    expect_logic_error([&] { device_array<int>(mem, {4}, {}, offset); },
                       "at byte offset " + std::to_string(offset));
    expect_logic_error([&] { device_array<int>(mem, {4}, {-4}, offset); },
                       "outside the buffer of 64 bytes");
  }
}

}  // namespace
}  // namespace gpumem
