// The CCCL adapter: a gpumem resource satisfies the cuda::mr concept of the CCCL in use, and
// memory makes the round trip through it. Compiled by nvcc (CCCL's headers are on its path).
#include "resource_test_support.hpp"

#include <gpumem/mr/cccl_resource_adaptor.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#if GPUMEM_HAS_CCCL_RESOURCE

namespace gpumem {
namespace {

using device_adaptor = cccl_resource_adaptor<cuda::mr::device_accessible>;
using host_device_adaptor =
    cccl_resource_adaptor<cuda::mr::device_accessible, cuda::mr::host_accessible>;

static_assert(cccl_resource_concept<device_adaptor>);
static_assert(cccl_resource_concept<host_device_adaptor>);
#if CCCL_VERSION >= 3001000
static_assert(cuda::mr::resource_with<device_adaptor, cuda::mr::device_accessible>);
static_assert(!cuda::mr::resource_with<device_adaptor, cuda::mr::host_accessible>);
#else
static_assert(cuda::mr::async_resource_with<device_adaptor, cuda::mr::device_accessible>);
static_assert(!cuda::mr::async_resource_with<device_adaptor, cuda::mr::host_accessible>);
static_assert(cuda::mr::resource_with<host_device_adaptor, cuda::mr::host_accessible>);
#endif

cuda::stream_ref default_stream() {
  cudaStream_t null_stream = nullptr;
  return cuda::stream_ref(null_stream);
}

TEST(cccl_resource_adaptor, round_trip_reaches_the_gpumem_resource) {
  cuda_resource device;
  statistics_adaptor stats(device);
  device_adaptor cccl(stats);

  void* p = cccl.allocate(default_stream(), 1000, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(stats.bytes().current, 1000);
  test::fill_block(stats, p, 1000, 0x3C, nullptr);
  EXPECT_EQ(test::first_mismatch(stats, p, 1000, 0x3C, nullptr), 1000u);
  cccl.deallocate(default_stream(), p, 1000, 256);
  EXPECT_EQ(stats.bytes().current, 0);

  // The other spellings reach the same resource.
  void* q = cccl.allocate_async(512, 128, default_stream());
  EXPECT_EQ(stats.allocations().current, 1);
  cccl.deallocate_async(q, 512, 128, default_stream());
  void* r = cccl.allocate_sync(64);
  void* s = cccl.allocate(std::size_t{64}, std::size_t{64});
  EXPECT_EQ(stats.allocations().current, 2);
  cccl.deallocate_sync(r, 64);
  cccl.deallocate(s, std::size_t{64}, std::size_t{64});
  EXPECT_EQ(stats.allocations().current, 0);
  EXPECT_EQ(stats.allocations().total, 4);
}

TEST(cccl_resource_adaptor, works_through_a_resource_ref) {
  cuda_resource device;
  statistics_adaptor stats(device);
  device_adaptor cccl(stats);
#if CCCL_VERSION >= 3001000
  cuda::mr::resource_ref<cuda::mr::device_accessible> ref(cccl);
  void* p = ref.allocate(default_stream(), 256, 256);
  EXPECT_EQ(stats.bytes().current, 256);
  ref.deallocate(default_stream(), p, 256, 256);
#else
  cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref(cccl);
  void* p = ref.allocate_async(256, 256, default_stream());
  EXPECT_EQ(stats.bytes().current, 256);
  ref.deallocate_async(p, 256, 256, default_stream());
#endif
  EXPECT_EQ(stats.bytes().current, 0);
}

TEST(cccl_resource_adaptor, equality_follows_the_wrapped_resource) {
  cuda_resource a;
  statistics_adaptor b(a);
  EXPECT_TRUE(device_adaptor(a) == device_adaptor(a));
  EXPECT_TRUE(device_adaptor(b) != device_adaptor(a));
}

TEST(cccl_resource_adaptor, rejects_bad_alignment_and_false_properties) {
  cuda_resource device;
  device_adaptor cccl(device);
  EXPECT_THROW(cccl.allocate(default_stream(), 64, 512), logic_error);
  EXPECT_THROW(cccl.allocate_sync(64, 3), logic_error);
  EXPECT_THROW(static_cast<void>(host_device_adaptor{device}),
               logic_error);  // device memory is not host accessible
  pinned_host_resource pinned;
  host_device_adaptor host(pinned);
  void* p = host.allocate_sync(128);
  static_cast<char*>(p)[0] = 1;
  host.deallocate_sync(p, 128);
}

}  // namespace
}  // namespace gpumem

#else
TEST(cccl_resource_adaptor, headers_present) {
  GTEST_SKIP() << "CCCL's <cuda/memory_resource> is not on the include path of this compiler";
}
#endif
