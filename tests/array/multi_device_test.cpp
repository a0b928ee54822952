// Several devices in one process (issue 16): each device has its own context, manager and pool;
// memory goes back to the manager of the device it came from whichever device is current when it
// is dropped; arrays are copied between devices through the array layer (a peer copy on the cuda
// backend). These need 2 devices: the host backend simulates one and a one-GPU machine has one,
// so there every test skips, saying so. scripts/gpu-check.sh runs them on the cuda backend.
#include <gpumem/array/device_array.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace gpumem {
namespace {

// Two devices, the pool manager on each, device 0 current; everything restored afterwards.
class multi_device : public ::testing::Test {
 protected:
  void SetUp() override {
    int const count = backend().device_count();
    if (count < 2)
      GTEST_SKIP() << "needs 2 devices; the " << to_string(backend().kind()) << " backend has "
                   << count;
    // set_memory_manager binds contexts created afterwards: earlier tests of this executable
    // left device 0's context (with the environment's manager) behind.
    close();
    set_memory_manager(load_memory_manager("pool"));
    backend().set_current_device(0);
  }
  void TearDown() override {
    if (backend().device_count() < 2) return;
    backend().set_current_device(0);
    set_memory_manager({});
    close();
  }
  static memory_statistics stats(int device) {
    return get_context(device).memory_manager().get_memory_statistics();
  }
};

TEST_F(multi_device, each_device_has_its_own_manager_and_pool) {
  memory_manager& m0 = get_context(0).memory_manager();
  memory_manager& m1 = get_context(1).memory_manager();
  ASSERT_NE(&m0, &m1);
  EXPECT_EQ(m0.name(), "pool");
  EXPECT_EQ(m1.name(), "pool");
  memory_pointer a = m0.memalloc(3 << 20);
  memory_pointer b = m1.memalloc(5 << 20);
  EXPECT_EQ(stats(0).bytes_in_use, 3u << 20);
  EXPECT_EQ(stats(1).bytes_in_use, 5u << 20);
  EXPECT_EQ(backend().current_device(), 0) << "allocating on device 1 changed the current device";
}

TEST_F(multi_device, memory_goes_back_to_its_own_device_whichever_is_current) {
  memory_pointer b = get_context(1).memory_manager().allocate(1 << 20, stream_handle{});
  ASSERT_EQ(stats(1).bytes_in_use, 1u << 20);
  backend().set_current_device(0);
  b = memory_pointer();  // dropped while device 0 is current
  EXPECT_EQ(stats(1).bytes_in_use, 0u);
  EXPECT_EQ(stats(0).total_allocations, 0u) << "device 0's manager saw device 1's memory";
  EXPECT_EQ(backend().current_device(), 0);
}

TEST_F(multi_device, arrays_are_copied_between_devices) {
  std::vector<int> host(1 << 16);
  std::iota(host.begin(), host.end(), 7);
  backend().set_current_device(1);
  device_array<int> on1 = to_device(host, {host.size()});
  backend().set_current_device(0);
  device_array<int> on0(shape_type{host.size()});
  copy(on0, on1);  // device 1 -> device 0: a peer copy on the cuda backend
  EXPECT_EQ(on0.copy_to_host(), host);
  EXPECT_EQ(stats(0).bytes_in_use, host.size() * sizeof(int));
  EXPECT_EQ(stats(1).bytes_in_use, host.size() * sizeof(int));
  backend().set_current_device(1);
  device_array<int> again(shape_type{host.size()});
  stream s = stream::create();
  copy(again, on0, s);  // device 0 -> device 1, stream-ordered
  s.synchronize();
  EXPECT_EQ(again.copy_to_host(), host);
}

}  // namespace
}  // namespace gpumem
