// A pool belongs to the device current at its construction: its growth, events and
// synchronisations happen there whichever device the calling thread has current, and the caller's
// device is left as it was. Checked on a simulated second device (a backend that forwards to the
// real one and notes every device call made while device 1 is current).
#include "../support/two_device_backend.hpp"
#include "pool_test_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem {
namespace {

using test::two_device_backend;

// cudaMalloc on the backend's current device.
class backend_upstream final : public memory_resource {
 public:
  explicit backend_upstream(device_backend& b) : backend_(b) {}
  std::string name() const override { return "backend_upstream"; }
  memory_info get_memory_info() const override { return backend_.get_memory_info(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override { return backend_.allocate(bytes); }
  void do_deallocate(void* p, std::size_t, stream_handle) noexcept override {
    backend_.deallocate(p);
  }
  device_backend& backend_;
};

// No call noted by `devices` on device 1; then the caller back on device 0 and the created
// streams among `streams` destroyed.
void expect_nothing_on_the_wrong_device(two_device_backend& devices,
                                        std::initializer_list<stream_handle> streams) {
  std::vector<std::string> const wrong = devices.on_wrong_device();
  std::string calls;
  for (auto const& call : wrong)
    calls += call + " ";
  EXPECT_TRUE(wrong.empty()) << "device calls made on device 1 for a device-0 pool: " << calls;
  devices.set_current_device(0);
  for (stream_handle s : streams)
    if (s != backend().per_thread_default_stream()) backend().destroy_stream(s);
}

// Every device call the pool makes for itself (growth, the stream it grows on, events,
// synchronisations, pages of an expandable pool, giving memory back, its destruction) happens on
// its device while the caller has device 1 current; the caller stays there.
void use_from_another_device(pool_options options) {
  two_device_backend devices(backend());
  backend_upstream up(devices);
  stream_handle const a = backend().create_stream(true);
  stream_handle const b = backend().create_stream(true);
  {
    options.backend = &devices;
    options.fence_bytes = 1 * MiB;  // an event for the frees on two streams
    options.chunk_size = 2 * MiB;
    options.maximum_size = 64 * MiB;
    pool_resource pool(up, options);
    devices.set_current_device(1);  // the caller moves to another device
    void* x = pool.allocate(8 * MiB, a);
    void* y = pool.allocate(8 * MiB, b);
    void* small = pool.allocate(4 * KiB, a);
    void* on_null = pool.allocate(6 * MiB, nullptr);  // the null stream: device 0's, not 1's
    pool.deallocate(on_null, 6 * MiB, nullptr);
    pool.deallocate(x, 8 * MiB, a);
    pool.deallocate(y, 8 * MiB, b);
    pool.deallocate(small, 4 * KiB, a);
    pool.release_stream(a);  // events: what a and b freed goes to the free extents
    EXPECT_THROW(pool.allocate(128 * MiB, a), out_of_memory);  // synchronises on the way
    (void)pool.get_memory_info();
    pool.release_stream(b);
    pool.trim();
    EXPECT_GT(pool.statistics().synchronizations, 0u);
    EXPECT_EQ(devices.current_device(), 1) << "the pool left the caller on another device";
  }  // destroyed while device 1 is current
  EXPECT_EQ(devices.current_device(), 1);
  expect_nothing_on_the_wrong_device(devices, {a, b});
}

TEST(pool_device, a_pool_works_on_its_own_device_whichever_is_current) {
  use_from_another_device({});
}

TEST(pool_device, an_expandable_pool_maps_its_pages_on_its_own_device) {
  pool_options options;
  options.expandable = true;
  use_from_another_device(options);
}

// An idle take asks another stream of the pool whether it is idle, and takes its block, on the
// pool's device whichever device the caller has current. The other stream is the calling thread's
// per-thread default stream, the one kind of stream besides the caller's that a call may ask about.
TEST(pool_device, an_idle_take_asks_on_the_pools_own_device) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  two_device_backend devices(backend());
  backend_upstream up(devices);
  stream_handle const a = backend().create_stream(true);
  stream_handle const own = backend().per_thread_default_stream();
  {
    pool_options options;
    options.backend = &devices;
    options.initial_size = 64 * MiB;  // one chunk: the take, not a growth, must serve the miss
    options.chunk_size = 64 * MiB;
    options.max_cached_size = 256 * KiB;
    pool_resource pool(up, options);
    void* const on_own = pool.allocate(48 * MiB, own);
    pool.deallocate(on_own, 48 * MiB, own);  // its own extents
    backend().synchronize_stream(own);       // idle
    devices.set_current_device(1);
    void* const taken = pool.allocate(40 * MiB, a);
    pool_statistics const st = pool.statistics();
    EXPECT_EQ(st.idle_takes, 1u);
    EXPECT_EQ(st.upstream_allocations, 1u);
    EXPECT_EQ(devices.current_device(), 1) << "the pool left the caller on another device";
    pool.check_invariants();
    pool.deallocate(taken, 40 * MiB, a);
    pool.release_stream(a);
  }
  expect_nothing_on_the_wrong_device(devices, {a, own});
}

}  // namespace
}  // namespace gpumem
