// memory_resource::backend_in_use: which device backend a resource works on, and the work the base
// class does on it for every resource (allocate_sync / deallocate_sync). selects_own_device: every
// adaptor forwards its upstream's, and one that does device work of its own does it on its device.
#include "../support/forwarding_backend.hpp"
#include "../support/two_device_backend.hpp"

#include <gpumem/core/error.hpp>
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
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// A pool selects its own device (callers need not make it current); so must every stack of
// adaptors over it, or a memory manager over e.g. a statistics_adaptor over a pool makes the device
// current around every call (one cudaGetDevice each) as if the pool were cuda_resource. Over a
// resource that allocates on the current device, every adaptor says so too.
TEST(resource_backend, adaptors_forward_whether_their_upstream_selects_its_own_device) {
  cuda_resource device;
  pool_resource pool(device);
  ASSERT_TRUE(pool.selects_own_device());
  ASSERT_FALSE(device.selects_own_device());
  for (memory_resource* upstream :
       {static_cast<memory_resource*>(&pool), static_cast<memory_resource*>(&device)}) {
    bool const expected = upstream->selects_own_device();
    std::ostringstream out;
    statistics_adaptor stats(*upstream);
    limit_adaptor limited(*upstream, 1 * MiB);
    failure_callback_adaptor retried(*upstream, [](std::size_t, int) { return false; });
    logging_adaptor logged(*upstream, out);
    tracking_adaptor tracked(*upstream);
    EXPECT_EQ(stats.selects_own_device(), expected) << "statistics_adaptor";
    EXPECT_EQ(limited.selects_own_device(), expected) << "limit_adaptor";
    EXPECT_EQ(retried.selects_own_device(), expected) << "failure_callback_adaptor";
    EXPECT_EQ(logged.selects_own_device(), expected) << "logging_adaptor";
    EXPECT_EQ(tracked.selects_own_device(), expected) << "tracking_adaptor";

    // A whole stack, and one owned by owning_adaptor.
    statistics_adaptor s2(*upstream);
    limit_adaptor l2(s2, 1 * MiB);
    failure_callback_adaptor f2(l2, [](std::size_t, int) { return false; });
    logging_adaptor g2(f2, out);
    tracking_adaptor t2(g2);
    EXPECT_EQ(t2.selects_own_device(), expected) << "a stack of every adaptor";
    auto owned = make_owning_adaptor<tracking_adaptor>(std::make_unique<statistics_adaptor>(t2));
    EXPECT_EQ(owned->selects_own_device(), expected) << "owning_adaptor over the stack";
  }
}

using test::two_device_backend;

// Over a pool, callers no longer make the device current, so the adaptors that do device work
// of their own do it on the pool's device (the one current when they were made): the tracking
// adaptor's poisoning on the null stream, the failure callback (which spills or flushes on that
// device). The caller's device is left as it was.
TEST(resource_backend, adaptors_over_a_pool_do_their_own_device_work_on_its_device) {
  two_device_backend devices(backend());
  cuda_resource device;
  pool_options options;
  options.backend = &devices;
  options.maximum_size = 4 * MiB;
  pool_resource pool(device, options);  // device 0's
  // The caller moves to another device, and makes the adaptors there: they still work on the
  // pool's device (own_device), not on the one current at their construction.
  devices.set_current_device(1);
  tracking_adaptor tracked(pool);
  std::vector<int> callback_devices;
  failure_callback_adaptor retried(pool, [&](std::size_t, int) {
    callback_devices.push_back(devices.current_device());
    return false;
  });
  EXPECT_EQ(pool.own_device(), 0);
  EXPECT_EQ(tracked.own_device(), 0);
  EXPECT_EQ(statistics_adaptor(retried).own_device(), 0);
  EXPECT_EQ(device.own_device(), -1) << "cuda_resource allocates on the current device";
  void* p = tracked.allocate(4 * KiB, nullptr);
  tracked.deallocate(p, 4 * KiB, nullptr);  // poisoned on the null stream: device 0's
  EXPECT_THROW(retried.allocate(64 * MiB, nullptr), out_of_memory);
  EXPECT_EQ(devices.current_device(), 1) << "the caller's device was not restored";
  std::vector<std::string> const wrong = devices.on_wrong_device();
  std::string calls;
  for (auto const& call : wrong)
    calls += call + " ";
  EXPECT_TRUE(wrong.empty()) << "device calls made on device 1 for a device-0 stack: " << calls;
  ASSERT_EQ(callback_devices.size(), 1u);
  EXPECT_EQ(callback_devices[0], 0) << "the callback ran on the caller's device, not the pool's";
  devices.set_current_device(0);
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
