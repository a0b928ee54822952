// buffer: allocation of each memory kind, round trips, slices, deep copies, sizes that cannot be
// served and the read/write rule of get_ptr.
#include "expect_error.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace gpumem {
namespace {

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out)
    b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

class buffer_kinds : public ::testing::TestWithParam<buffer_memory> {};

TEST_P(buffer_kinds, round_trip_through_each_kind) {
  auto const host = random_bytes(1000, 7);
  buffer b = buffer::from_host(host.data(), host.size(), GetParam());
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(b.memory(), GetParam());
  EXPECT_NE(b.get_ptr(access::read), nullptr);
  EXPECT_FALSE(b.is_view());
  EXPECT_EQ(b.to_host(), host);
}

TEST_P(buffer_kinds, asynchronous_round_trip_on_a_stream) {
  auto const host = random_bytes(4096, 8);
  auto s = stream::create();
  buffer b = buffer::from_host(host.data(), host.size(), s, GetParam());
  buffer c = b.copy(s);
  EXPECT_EQ(c.memory(), GetParam());
  EXPECT_FALSE(c.owns_same_memory(b));
  EXPECT_EQ(c.to_host(s), host);
}

TEST_P(buffer_kinds, zero_bytes_allocate_nothing) {
  buffer b(0, GetParam());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.memory(), GetParam());
  EXPECT_EQ(b.get_ptr(access::write), nullptr);
  EXPECT_TRUE(b.to_host().empty());
  EXPECT_TRUE(b.copy().empty());
  EXPECT_TRUE(b.slice(0, 0).empty());
  EXPECT_EQ(b.share_owner(), nullptr);
  EXPECT_FALSE(b.owns_same_memory(b));
  buffer from_nothing = buffer::from_host(nullptr, 0, GetParam());
  EXPECT_TRUE(from_nothing.empty());
}

// The largest sizes are refused with out_of_memory naming the size, for every kind (the manager
// must not try a request that wraps when rounded).
TEST_P(buffer_kinds, sizes_near_size_max_are_refused) {
  std::size_t const sizes[] = {std::numeric_limits<std::size_t>::max(),
                               std::numeric_limits<std::size_t>::max() - 255,
                               max_allocation_bytes + 1};
  for (std::size_t bytes : sizes) {
    try {
      buffer b(bytes, GetParam());
      ADD_FAILURE() << "allocated " << bytes << " bytes of " << to_string(GetParam());
    } catch (out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), bytes) << e.what();
    }
  }
  char byte = 0;
  EXPECT_THROW(buffer::from_host(&byte, std::numeric_limits<std::size_t>::max(), GetParam()),
               out_of_memory);
}

INSTANTIATE_TEST_SUITE_P(memory, buffer_kinds,
                         ::testing::Values(buffer_memory::device, buffer_memory::pinned,
                                           buffer_memory::managed),
                         [](auto const& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// Pinned and managed memory are host accessible: writes through the pointer reach the buffer.
TEST(buffer, host_writes_to_pinned_and_managed_memory) {
  for (buffer_memory kind : {buffer_memory::pinned, buffer_memory::managed}) {
    buffer b(64, kind);
    auto* p = static_cast<unsigned char*>(b.get_ptr(access::write));
    for (int i = 0; i < 64; ++i)
      p[i] = static_cast<unsigned char>(3 * i);
    auto const back = b.slice(10, 4).to_host();
    ASSERT_EQ(back.size(), 4u);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(static_cast<int>(back[i]), 3 * (10 + i)) << to_string(kind);
  }
}

TEST(buffer, slices_of_slices_view_the_same_bytes) {
  auto const host = random_bytes(512, 9);
  buffer const b = buffer::from_host(host.data(), host.size());
  buffer const s1 = b.slice(100, 300);
  buffer const s2 = s1.slice(50, 100);  // bytes [150, 250) of b
  EXPECT_TRUE(s1.is_view());
  EXPECT_TRUE(s2.is_view());
  EXPECT_TRUE(s2.owns_same_memory(b));
  EXPECT_EQ(static_cast<unsigned char const*>(s2.get_ptr(access::read)) -
                static_cast<unsigned char const*>(b.get_ptr(access::read)),
            150);
  auto const back = s2.to_host();
  EXPECT_EQ(back, std::vector<std::byte>(host.begin() + 150, host.begin() + 250));
  // A slice outlives the handle it was taken from.
  buffer tail;
  {
    buffer const temp = buffer::from_host(host.data(), host.size());
    tail = temp.slice(500, 12);
  }
  EXPECT_EQ(tail.to_host(), std::vector<std::byte>(host.begin() + 500, host.end()));
}

TEST(buffer, slice_bounds_are_checked) {
  buffer const b(100);
  test::expect_logic_error([&] { b.slice(90, 11); },
                           "buffer::slice: [90, 90 + 11) is outside the buffer of 100 bytes");
  test::expect_logic_error([&] { b.slice(101, 0); }, "[101, 101 + 0)");
  std::size_t const huge = std::numeric_limits<std::size_t>::max();
  test::expect_logic_error([&] { b.slice(1, huge); },
                           "[1, 1 + " + std::to_string(huge) + ") is outside");
  test::expect_logic_error([&] { b.slice(90, 10).slice(5, 6); }, "outside the buffer of 10 bytes");
  EXPECT_EQ(b.slice(100, 0).size(), 0u);
}

TEST(buffer, deep_copy_is_independent) {
  auto const host = random_bytes(256, 10);
  buffer b = buffer::from_host(host.data(), host.size());
  buffer c = b.slice(16, 64).copy();
  EXPECT_FALSE(c.is_view());
  EXPECT_FALSE(c.owns_same_memory(b));
  buffer zeros = buffer::from_host(std::vector<std::byte>(256).data(), 256);
  b = zeros;  // the handle now shares zeros' storage; c keeps its own bytes
  EXPECT_TRUE(b.owns_same_memory(zeros));
  EXPECT_FALSE(b.is_view());
  EXPECT_EQ(c.to_host(), std::vector<std::byte>(host.begin() + 16, host.begin() + 80));
}

TEST(buffer, copy_to_host_checks_its_range) {
  auto const host = random_bytes(32, 11);
  buffer const b = buffer::from_host(host.data(), host.size());
  std::vector<std::byte> dst(8);
  b.copy_to_host(dst.data(), dst.size());
  EXPECT_EQ(dst, std::vector<std::byte>(host.begin(), host.begin() + 8));
  std::vector<std::byte> big(64);
  test::expect_logic_error([&] { b.copy_to_host(big.data(), 33); },
                           "33 bytes asked for from a buffer of 32 bytes");
  test::expect_logic_error(
      [&] { b.copy_to_host(big.data(), std::numeric_limits<std::size_t>::max()); },
      std::to_string(std::numeric_limits<std::size_t>::max()) + " bytes asked for");
  test::expect_logic_error([&] { b.copy_to_host(nullptr, 4); }, "null host pointer for 4 bytes");
  test::expect_logic_error([&] { buffer::from_host(nullptr, 4); },
                           "buffer::from_host: null host pointer for 4 bytes");
}

TEST(buffer, write_access_through_a_const_buffer_is_refused) {
  buffer b(16);
  buffer const& cb = b;
  EXPECT_EQ(cb.get_ptr(access::read), b.get_ptr(access::write));
  test::expect_logic_error([&] { cb.get_ptr(access::write); },
                           "write access asked for through a const buffer");
}

TEST(buffer, default_buffer_is_empty_device_memory) {
  buffer const b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.memory(), buffer_memory::device);
  EXPECT_EQ(b.get_ptr(access::read), nullptr);
  EXPECT_FALSE(b.is_view());
}

}  // namespace
}  // namespace gpumem
