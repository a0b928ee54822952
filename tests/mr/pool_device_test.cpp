// A pool belongs to the device current at its construction: its growth, events and
// synchronisations happen there whichever device the calling thread has current, and the caller's
// device is left as it was. Checked on a simulated second device (a backend that forwards to the
// real one and notes every device call made while device 1 is current).
#include "../support/forwarding_backend.hpp"
#include "pool_test_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem {
namespace {

class two_device_backend final : public test::forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  int device_count() override { return 2; }
  int current_device() override { return current(); }
  void set_current_device(int ordinal) override {
    if (ordinal < 0 || ordinal > 1)
      throw logic_error("two_device_backend: no device " + std::to_string(ordinal));
    current() = ordinal;
  }
  void synchronize() override {
    note("synchronize");
    inner_.synchronize();
  }
  void* allocate(std::size_t bytes) override {
    note("allocate");
    return inner_.allocate(bytes);
  }
  void deallocate(void* ptr) override {
    note("deallocate");
    inner_.deallocate(ptr);
  }
  event_handle create_event(bool timing) override {
    note("create_event");
    return inner_.create_event(timing);
  }
  memory_info get_memory_info() override {
    note("get_memory_info");
    return inner_.get_memory_info();
  }
  stream_handle create_stream(bool non_blocking) override {
    note("create_stream");
    return inner_.create_stream(non_blocking);
  }
  physical_handle create_physical(std::size_t bytes) override {
    note("create_physical");
    return inner_.create_physical(bytes);
  }
  void map_physical(void* address, std::size_t bytes, physical_handle chunk) override {
    note("map_physical");
    inner_.map_physical(address, bytes, chunk);
  }
  void unmap(void* address, std::size_t bytes) override {
    note("unmap");
    inner_.unmap(address, bytes);
  }
  void* reserve_address_range(std::size_t bytes) override {
    note("reserve_address_range");
    return inner_.reserve_address_range(bytes);
  }
  // The null, legacy and per-thread handles name a stream of the current device: calls on them
  // must be made on the pool's device. (A created stream and an event carry their device.)
  void record_event(event_handle event, stream_handle stream) override {
    note_on(stream, "record_event");
    inner_.record_event(event, stream);
  }
  bool query_stream(stream_handle stream) override {
    note_on(stream, "query_stream");
    return inner_.query_stream(stream);
  }
  void synchronize_stream(stream_handle stream) override {
    note_on(stream, "synchronize_stream");
    inner_.synchronize_stream(stream);
  }

  // Device calls made while device 1 was current.
  std::vector<std::string> on_wrong_device() {
    std::lock_guard<std::mutex> lock(mutex_);
    return wrong_;
  }

 private:
  static int& current() {
    thread_local int device = 0;
    return device;
  }
  void note_on(stream_handle stream, char const* call) {
    if (reinterpret_cast<std::uintptr_t>(stream) <= 2) note(call);
  }
  void note(char const* call) {
    if (current() == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    wrong_.emplace_back(call);
  }
  std::mutex mutex_;
  std::vector<std::string> wrong_;
};

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
  std::vector<std::string> const wrong = devices.on_wrong_device();
  std::string calls;
  for (auto const& call : wrong)
    calls += call + " ";
  EXPECT_TRUE(wrong.empty()) << "device calls made on device 1 for a device-0 pool: " << calls;
  devices.set_current_device(0);
  backend().destroy_stream(a);
  backend().destroy_stream(b);
}

TEST(pool_device, a_pool_works_on_its_own_device_whichever_is_current) {
  use_from_another_device({});
}

TEST(pool_device, an_expandable_pool_maps_its_pages_on_its_own_device) {
  pool_options options;
  options.expandable = true;
  use_from_another_device(options);
}

}  // namespace
}  // namespace gpumem
