// memory_resource::backend_in_use: which device backend a resource works on, and the work the base
// class does on it for every resource (allocate_sync / deallocate_sync).
#include <gpumem/core/units.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/managed_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

namespace gpumem {
namespace {

TEST(resource_backend, upstreams_name_theirs_adaptors_forward_their_upstreams) {
  auto small = make_host_backend({4 * MiB});
  cuda_resource device(small.get());
  EXPECT_EQ(device.backend_in_use(), small.get());
  EXPECT_EQ(managed_resource({}, small.get()).backend_in_use(), small.get());
  EXPECT_EQ(pinned_host_resource({}, small.get()).backend_in_use(), small.get());
  EXPECT_EQ(async_resource({}, small.get()).backend_in_use(), small.get());
  EXPECT_EQ(cuda_resource().backend_in_use(), &backend());  // the process-wide one by default

  statistics_adaptor stats(device);
  limit_adaptor limited(stats, 1 * MiB);
  failure_callback_adaptor retried(limited, [](std::size_t, int) { return false; });
  std::ostringstream out;
  logging_adaptor logged(retried, out);
  tracking_adaptor tracked(logged);
  EXPECT_EQ(tracked.backend_in_use(), small.get());

  // A pool works on its pool_options::backend (its streams and events), not its upstream's.
  pool_resource on_default(device);
  EXPECT_EQ(on_default.backend_in_use(), &backend());
  pool_options options;
  options.backend = small.get();
  pool_resource pool(device, options);
  EXPECT_EQ(pool.backend_in_use(), small.get());
  auto owned =
      make_owning_adaptor<statistics_adaptor>(std::make_unique<pool_resource>(device, options));
  EXPECT_EQ(owned->backend_in_use(), small.get());
}

// allocate_sync promises memory the host may use at once: over a private backend, the work queued
// on that backend's default stream before the free must be done when it returns.
TEST(resource_backend, sync_calls_synchronise_the_resources_own_backend) {
  auto dev = make_host_backend({64 * MiB});
  cuda_resource device(dev.get());
  pool_options options;
  options.backend = dev.get();
  pool_resource pool(device, options);
  auto* x = static_cast<unsigned char*>(pool.allocate(4096, nullptr));
  // "A kernel" on the private default stream that still writes x. It runs late: before the fix
  // nothing waited for it. (Waiting for it is what the test checks, so the delay never makes
  // it flaky the other way.)
  dev->enqueue_host_function(nullptr, [x] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::memset(x, 0xAA, 4096);
  });
  pool.deallocate(x, 4096, nullptr);  // stream-ordered: x may be reused at once on this stream
  auto* y = static_cast<unsigned char*>(pool.allocate_sync(4096));
  ASSERT_EQ(y, x) << "the pool reuses a block at once on its stream: the case under test";
  std::memset(y, 0x11, 4096);  // the host's write, after a synchronised allocation
  dev->synchronize_stream(nullptr);
  EXPECT_EQ(std::count(y, y + 4096, 0x11), 4096) << "pending work overwrote the new block";

  std::atomic<bool> done{false};
  dev->enqueue_host_function(nullptr, [&done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    done.store(true);
  });
  pool.deallocate_sync(y, 4096);
  EXPECT_TRUE(done.load()) << "deallocate_sync returned before the stream's work was done";
}

}  // namespace
}  // namespace gpumem
