// Pinned, mapped and managed arrays, and the pinned()/mapped() scopes (re-entry included).
#include "array_test_support.hpp"

#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/array/pin_scope.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace gpumem {
namespace {

TEST(pinned_array, async_round_trip_through_the_device) {
  pinned_array<float> src({3, 4});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      src(i, j) = static_cast<float>(i * 10 + j);
  auto s = stream::create();
  device_array<float> d({3, 4});
  copy(d, src, s);
  pinned_array<float> dst({3, 4});
  copy(dst, d, s);
  s.synchronize();
  EXPECT_EQ(dst.to_vector(), src.to_vector());
  EXPECT_EQ(dst(2, 3), 23.f);
  test::expect_logic_error([&] { dst(3, 0); }, "index (3, 0) out of range for dimension 0");
  test::expect_logic_error([&] { dst(1); }, "1 indices for an array of rank 2");
}

TEST(host_arrays, index_errors_name_the_indices_and_the_dimension) {
  managed_array<int> m({2, 3});
  test::expect_logic_error([&] { m(1, 5); },
                           "index (1, 5) out of range for dimension 1 (length 3) of an array of "
                           "shape (2, 3)");
  test::expect_logic_error([&] { m(2, 0); },
                           "index (2, 0) out of range for dimension 0 (length 2)");
  test::expect_logic_error([&] { m(-1, 0); }, "index (-1, 0) out of range for dimension 0");
  pinned_array<float> p({4});
  test::expect_logic_error([&] { p(4); }, "index (4,) out of range for dimension 0 (length 4)");
}

// Moving any array type leaves the source as a default array: no pointer, shape (0,), no owner.
template <class Array>
void expect_move_empties_the_source() {
  Array a({3, 2});
  int* const memory = a.data();
  Array b = std::move(a);
  EXPECT_EQ(b.data(), memory);
  EXPECT_EQ(b.use_count(), 1);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.shape(), (shape_type{0}));
  EXPECT_EQ(a.use_count(), 0);
  EXPECT_EQ(a.host_view().data(), nullptr);
  EXPECT_TRUE(a.to_vector().empty());
  test::expect_logic_error([&] { a(0); }, "index (0,) out of range for dimension 0 (length 0)");
  Array c({1});
  c = std::move(b);
  EXPECT_EQ(c.data(), memory);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.use_count(), 0);
}

TEST(host_arrays, moving_leaves_the_source_empty) {
  expect_move_empties_the_source<pinned_array<int>>();
  expect_move_empties_the_source<mapped_array<int>>();
  expect_move_empties_the_source<managed_array<int>>();
  mapped_array<int> m({4});
  mapped_array<int> n = std::move(m);
  EXPECT_EQ(m.view().data(), nullptr);  // the device address too
  EXPECT_NE(n.view().data(), nullptr);
}

TEST(pinned_array, zero_size_allocates_nothing) {
  pinned_array<int> empty({0});
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.use_count(), 0);
  mapped_array<int> m({0});
  EXPECT_EQ(m.view().data(), nullptr);
  managed_array<int> g({4, 0});
  EXPECT_EQ(g.data(), nullptr);
}

TEST(mapped_array, host_writes_reach_the_device) {
  mapped_array<int> m({16});
  for (int i = 0; i < 16; ++i)
    m(i) = i * i;
  EXPECT_NE(m.view().data(), nullptr);
  device_array<int> d({16});
  copy(d, m);
  auto back = d.copy_to_host();
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(back[i], i * i);
  auto tail = m.slice({slice{8, 16}});
  EXPECT_EQ(tail(0), 64);
  EXPECT_EQ(reinterpret_cast<char*>(tail.view().data()) - reinterpret_cast<char*>(m.view().data()),
            8 * static_cast<std::ptrdiff_t>(sizeof(int)));
}

TEST(managed_array, host_and_device_share_one_address) {
  managed_array<double> g({2, 3}, array_order::fortran, attach::global);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      g(i, j) = static_cast<double>(i + 10 * j);
  EXPECT_EQ(g.view().data(), g.data());
  auto d = device_array_like(g);
  copy(d, g);
  EXPECT_EQ(d.copy_to_host(), g.to_vector());
  EXPECT_EQ(g.to_vector(), (std::vector<double>{0, 1, 10, 11, 20, 21}));  // Fortran order
  managed_array<int> h({4}, array_order::c, attach::host);
  h(3) = 7;
  EXPECT_EQ(h.to_vector()[3], 7);
}

TEST(pin_scope, pins_for_the_scope_and_can_be_reentered) {
  std::vector<float> data(4096);
  std::iota(data.begin(), data.end(), 0.f);
  auto d = device_array<float>({4096});
  for (int round = 0; round < 3; ++round) {
    auto pin = pinned(host_span<float>(data));
    EXPECT_EQ(pin.count(), 1u);
    // The range really is registered: registering it again is refused.
    EXPECT_THROW(backend().register_host(data.data(), data.size() * sizeof(float), false, false),
                 cuda_error);
    auto s = stream::create();
    d.copy_to_device(data, s);
    s.synchronize();
  }
  // After the scope the range is unpinned at once: registering it directly works.
  backend().register_host(data.data(), data.size() * sizeof(float), false, false);
  backend().unregister_host(data.data());
  EXPECT_EQ(d.copy_to_host(), data);
}

TEST(pin_scope, reentry_works_inside_defer_cleanup_and_flushes_nothing) {
  std::vector<int> data(1024, 3);
  pending_deallocations& queue = current_context().pending_deallocations();
  cleanup_guard guard = current_context().memory_manager().defer_cleanup();
  { (void)device_array<int>({16}); }  // a queued device free must stay queued
  std::size_t const queued = queue.size();
  for (int round = 0; round < 3; ++round) {
    auto map = mapped(host_span<int>(data));
    EXPECT_EQ(map.array()(5), 3);
  }
  EXPECT_EQ(queue.size(), queued) << "a pin scope neither queues its unpin nor flushes the queue";
  backend().register_host(data.data(), data.size() * sizeof(int), false, false);
  backend().unregister_host(data.data());
}

TEST(pin_scope, several_spans_and_empty_ones) {
  std::vector<int> a(100), b(50);
  std::vector<int> none;
  auto pin = pinned(host_span<int>(a), host_span<int>(b), host_span<int>(none));
  EXPECT_EQ(pin.count(), 2u);
}

// A span whose byte size would wrap describes no memory: refused by value, before pinned() could
// pin a wrapped (small) range.
TEST(pin_scope, a_span_whose_bytes_would_wrap_is_refused) {
  int one = 0;
  std::size_t const count = ~std::size_t{0} / sizeof(int);
  test::expect_logic_error([&] { (void)host_span<int>(&one, count); },
                           std::to_string(count) + " elements");
  EXPECT_EQ(host_span<int>(&one, 1).size_bytes(), sizeof(int));
}

// A null pointer with a size used to be accepted: a copy from it read address 0 (UBSan: null
// passed to memcpy on the host backend; a fault on the cuda one).
TEST(pin_scope, a_null_span_with_a_size_is_refused) {
  test::expect_logic_error([] { (void)host_span<float const>(nullptr, 4); },
                           "host_span: null pointer for 4 elements");
  EXPECT_TRUE(host_span<float>(nullptr, 0).empty());
  device_array<float> d({4});
  test::expect_logic_error([&] { d.copy_to_device(host_span<float const>(nullptr, 4)); },
                           "null pointer");
}

TEST(mapped_scope, gives_a_mapped_array_and_can_be_reentered) {
  std::vector<int> data(256, 0);
  for (int round = 0; round < 3; ++round) {
    auto map = mapped(host_span<int>(data));
    auto const& arr = map.array();
    ASSERT_EQ(arr.size(), 256u);
    EXPECT_EQ(arr.data(), data.data());
    EXPECT_NE(arr.view().data(), nullptr);
    arr(5) = round + 1;  // host writes land in the user's memory
    device_array<int> d({256});
    copy(d, arr);
    EXPECT_EQ(d.copy_to_host()[5], round + 1);
  }
  EXPECT_EQ(data[5], 3);
}

}  // namespace
}  // namespace gpumem
