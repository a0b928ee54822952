// The dynamic shared-memory carver's layout (host part; the kernel test is in
// array_kernel_test.cu).
#include <gpumem/array/shared_memory.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpumem {
namespace {

TEST(shared_memory_carver, plans_aligned_disjoint_pieces) {
  shared_memory_carver plan;
  plan.take<char>(3);
  EXPECT_EQ(plan.bytes(), 3u);
  plan.take<float>(3);
  EXPECT_EQ(plan.last_offset(), 4u);
  plan.take<double>(1);
  EXPECT_EQ(plan.last_offset(), 16u);
  plan.take<std::int16_t>(5);
  EXPECT_EQ(plan.last_offset(), 24u);
  EXPECT_EQ(plan.bytes(), 34u);
  EXPECT_FALSE(plan.failed());
}

TEST(shared_memory_carver, the_spec_example_needs_eight_bytes) {
  shared_memory_carver plan;
  plan.take<float>(1);
  plan.take<std::int32_t>(1);
  EXPECT_EQ(plan.bytes(), 8u);
}

TEST(shared_memory_carver, carves_a_buffer_without_aliasing) {
  alignas(16) unsigned char buffer[64];
  shared_memory_carver c(buffer, sizeof buffer);
  auto f = c.take<float>(3);
  auto d = c.take<double>(2);
  auto i = c.take<int>(4);
  ASSERT_FALSE(c.failed());
  for (std::size_t k = 0; k < 3; ++k)
    f[k] = 3.14f;
  for (std::size_t k = 0; k < 2; ++k)
    d[k] = 2.5;
  for (std::size_t k = 0; k < 4; ++k)
    i[k] = 1;
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_EQ(f[k], 3.14f);
  for (std::size_t k = 0; k < 2; ++k)
    EXPECT_EQ(d[k], 2.5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.data()) % alignof(double), 0u);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(i.data()) + 16, buffer + c.bytes());
}

TEST(shared_memory_carver, overflow_fails_without_trapping) {
  alignas(16) unsigned char buffer[16];
  shared_memory_carver c(buffer, sizeof buffer);
  auto a = c.take<int>(3);
  EXPECT_NE(a.data(), nullptr);
  auto b = c.take<double>(1);  // would need bytes [16, 24)
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_TRUE(c.failed());
  EXPECT_EQ(c.bytes(), 12u);
  auto huge = shared_memory_carver().take<double>(~std::size_t{0} / 4);
  EXPECT_EQ(huge.size(), 0u);
}

// A planning carver (no capacity) whose pieces reach the top of size_t: aligning the next offset
// would wrap to 0 and hand out a piece that aliases the first one.
TEST(shared_memory_carver, alignment_near_size_max_fails_instead_of_wrapping) {
  shared_memory_carver plan;
  auto bytes = plan.take<unsigned char>(~std::size_t{0} - 1);
  EXPECT_EQ(bytes.size(), ~std::size_t{0} - 1);
  EXPECT_FALSE(plan.failed());
  auto next = plan.take<int>(1);
  EXPECT_EQ(next.size(), 0u);
  EXPECT_TRUE(plan.failed());
  EXPECT_EQ(plan.bytes(), ~std::size_t{0} - 1) << "a failed piece must not move the end";
}

}  // namespace
}  // namespace gpumem
