#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <string>

namespace gpumem {
namespace {

TEST(limit_adaptor, exactly_the_limit_fits_one_byte_more_does_not) {
  cuda_resource upstream;
  limit_adaptor limited(upstream, 4 * KiB);
  void* whole = limited.allocate(4 * KiB, nullptr);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(limited.used_bytes(), 4 * KiB);
  EXPECT_THROW(limited.allocate(1, nullptr), out_of_memory);
  limited.deallocate(whole, 4 * KiB, nullptr);
  EXPECT_EQ(limited.used_bytes(), 0u);

  void* a = limited.allocate(3000, nullptr);
  void* b = limited.allocate(4 * KiB - 3000, nullptr);
  try {
    limited.allocate(1, nullptr);
    FAIL() << "allocated past the limit";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 1u);
    EXPECT_EQ(e.current_bytes(), 4 * KiB);
    EXPECT_NE(e.allocator().find("limit_adaptor"), std::string::npos) << e.allocator();
    std::string const what = e.what();
    EXPECT_NE(what.find("limit"), std::string::npos) << what;
    EXPECT_NE(what.find(format_bytes(4 * KiB)), std::string::npos) << what;
  }
  EXPECT_EQ(limited.peak_bytes(), 4 * KiB);
  limited.deallocate(a, 3000, nullptr);
  limited.deallocate(b, 4 * KiB - 3000, nullptr);
}

TEST(limit_adaptor, request_larger_than_the_limit_fails_without_overflow) {
  cuda_resource upstream;
  limit_adaptor limited(upstream, 1 * KiB);
  EXPECT_THROW(limited.allocate(~std::size_t{0}, nullptr), out_of_memory);
  EXPECT_EQ(limited.used_bytes(), 0u);
}

TEST(limit_adaptor, upstream_failure_returns_the_reservation) {
  auto small_device = make_host_backend({64 * KiB});
  cuda_resource upstream(small_device.get());
  limit_adaptor limited(upstream, 1 * MiB);
  EXPECT_THROW(limited.allocate(512 * KiB, nullptr), out_of_memory);
  EXPECT_EQ(limited.used_bytes(), 0u);
  void* p = limited.allocate(16 * KiB, nullptr);
  EXPECT_EQ(limited.used_bytes(), 16 * KiB);
  limited.deallocate(p, 16 * KiB, nullptr);
}

TEST(limit_adaptor, memory_info_reports_the_limit) {
  cuda_resource upstream;
  limit_adaptor limited(upstream, 8 * KiB);
  void* p = limited.allocate(3 * KiB, nullptr);
  memory_info const info = limited.get_memory_info();
  EXPECT_EQ(info.total, 8 * KiB);
  EXPECT_EQ(info.free, 5 * KiB);
  limited.deallocate(p, 3 * KiB, nullptr);
}

// The peak is of what was live: a request the upstream refused never was.
TEST(limit_adaptor, a_request_the_upstream_refuses_does_not_count_in_the_peak) {
  auto small = make_host_backend({64 * KiB});
  cuda_resource upstream(small.get());
  limit_adaptor limited(upstream, 1 * MiB);
  EXPECT_THROW(limited.allocate(512 * KiB, nullptr), out_of_memory);  // under the limit, too big
  EXPECT_EQ(limited.used_bytes(), 0u);
  EXPECT_EQ(limited.peak_bytes(), 0u);
  void* p = limited.allocate(1 * KiB, nullptr);
  EXPECT_EQ(limited.peak_bytes(), 1 * KiB);
  limited.deallocate(p, 1 * KiB, nullptr);
  EXPECT_EQ(limited.peak_bytes(), 1 * KiB);
}

// A free that the resource below refuses (the pool catches a double free and ignores it) frees
// nothing: the limit keeps counting the block, so no more than the limit is ever live, and the
// count never wraps (report_refused_deallocation, memory_resource.hpp).
TEST(limit_adaptor, a_free_refused_below_frees_nothing) {
  cuda_resource device;
  pool_resource pool(device);
  limit_adaptor limited(pool, 64 * MiB);
  void* const a = limited.allocate(32 * MiB, nullptr);
  void* const b = limited.allocate(16 * MiB, nullptr);
  limited.deallocate(b, 16 * MiB, nullptr);
  limited.deallocate(b, 16 * MiB, nullptr);  // a double free: the pool logs it and ignores it
  EXPECT_EQ(limited.used_bytes(), 32 * MiB);
  EXPECT_THROW((void)limited.allocate(48 * MiB, nullptr), out_of_memory) << "past the limit";
  limited.deallocate(a, 32 * MiB, nullptr);
  EXPECT_EQ(limited.used_bytes(), 0u);
  void* const c = limited.allocate(1, nullptr);
  limited.deallocate(c, 1, nullptr);
}

}  // namespace
}  // namespace gpumem
