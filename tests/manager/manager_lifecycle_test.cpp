// The built-in managers over a context's life: made on the context's device, their memory's late
// frees after a device reset, memory handed back by the async manager, and memory pointers that
// outlive everything (a user's global, destroyed at exit).
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/manager/ipc_mixin.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include "dead_context_backend.hpp"
#include "forwarding_backend.hpp"
#include "scoped_backend.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace gpumem {
namespace {

// --- late frees after a device reset -------------------------------------------------------------

class manager_device_reset : public ::testing::TestWithParam<std::string> {};

TEST_P(manager_device_reset, frees_of_live_memory_make_no_device_call) {
  // Numba's cuda.close() closes the context before it resets the device: memory still live is the
  // reset's, and a free by address afterwards could free the next context's memory.
  (void)backend();
  test::dead_context_device device(256 * MiB);
  set_memory_manager(load_memory_manager(GetParam()));
  memory_manager& m = get_context(0).memory_manager();
  std::vector<char> host(4096);
  memory_pointer live = m.memalloc(MiB);
  host_memory pinned = m.memhostalloc(4096, host_alloc_flags{});
  host_memory mapped = m.memhostalloc(4096, host_alloc_flags{/*mapped=*/true});
  managed_memory managed = m.memallocmanaged(4096, true);
  host_memory pin = m.mempin(nullptr, host.data(), host.size(), false);
  close_for_device_reset(0);
  device.counter->dead = true;  // cuDevicePrimaryCtxReset
  live = memory_pointer();
  pinned = host_memory();
  mapped = host_memory();
  managed = managed_memory();
  pin = host_memory();
  device.counter->dead = false;
  EXPECT_EQ(device.counter->calls_after_death.load(), 0) << GetParam();
  set_memory_manager({});
  close();
}

INSTANTIATE_TEST_SUITE_P(builtins, manager_device_reset,
                         ::testing::Values("default", "host_only", "pool", "async"));

// --- the context's device ------------------------------------------------------------------------

// One host device presented as two, each thread with its own current device.
class two_devices final : public test::forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  int device_count() override { return 2; }
  int current_device() override { return current; }
  void set_current_device(int d) override { current = d; }
  static thread_local int current;
};
thread_local int two_devices::current = 0;

// A plugin as docs/manager.md shows one, noting the device current in each call.
class noting_plugin final : public ipc_mixin<host_only_memory_manager> {
 public:
  using ipc_mixin<host_only_memory_manager>::ipc_mixin;
  static inline int constructed_on = -1;
  static inline int initialized_on = -1;
  explicit noting_plugin(context& owner) : ipc_mixin(owner) {
    constructed_on = backend().current_device();
  }
  void initialize() override { initialized_on = backend().current_device(); }
  memory_pointer memalloc(std::size_t bytes) override {
    void* const p = allocate_device(bytes);
    return memory_pointer(owning_context(), p, bytes, device_release(p, bytes));
  }
  memory_info get_memory_info() override { return backend().get_memory_info(); }
  int interface_version() const override { return memory_manager_interface_version; }
  std::string name() const override { return "noting"; }
};

TEST(manager_device, a_manager_is_made_and_initialised_with_its_contexts_device_current) {
  (void)backend();
  auto inner = make_host_backend();
  test::scoped_backend swap(std::make_unique<two_devices>(*inner));
  set_memory_manager([](context& c) { return std::make_unique<noting_plugin>(c); });
  ASSERT_EQ(backend().current_device(), 0);
  context& second = get_context(1);
  EXPECT_EQ(noting_plugin::constructed_on, 1);
  EXPECT_EQ(noting_plugin::initialized_on, 1);
  EXPECT_EQ(backend().current_device(), 0) << "the caller's device is restored";
  EXPECT_EQ(second.device(), 1);
  set_memory_manager({});
}

// --- the async manager gives its pool's memory back ----------------------------------------------

// Counts what the async manager asks of the driver's pool (the host backend keeps no such pool, so
// the count is what shows the give-back).
class counting_async_pool final : public test::forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  std::size_t set_async_release_threshold(std::size_t bytes) override {
    threshold = bytes;
    return forwarding_backend::set_async_release_threshold(bytes);
  }
  void trim_async_pool(std::size_t keep_bytes) override {
    ++trims;
    forwarding_backend::trim_async_pool(keep_bytes);
  }
  std::size_t threshold = 0;
  int trims = 0;
};

TEST(async_manager, reset_and_out_of_memory_give_the_driver_pools_memory_back) {
  (void)backend();
  auto inner = make_host_backend(host_backend_options{256 * MiB});
  auto counting = std::make_unique<counting_async_pool>(*inner);
  counting_async_pool& pool = *counting;
  test::scoped_backend swap(std::move(counting));
  set_memory_manager(load_memory_manager("async"));
  EXPECT_EQ(pool.threshold, 0u) << "set_memory_manager's probe touched the device";
  memory_manager& m = get_context(0).memory_manager();
  EXPECT_EQ(pool.threshold, ~std::size_t{0}) << "initialize() keeps freed memory in the pool";
  { memory_pointer big = m.memalloc(192 * MiB); }
  m.reset();
  EXPECT_EQ(pool.trims, 1);
  // Managed memory is the device's: it fits only if the pool gave the freed block back.
  EXPECT_NO_THROW({ managed_memory managed = m.memallocmanaged(192 * MiB, true); });
  { memory_pointer big = m.memalloc(192 * MiB); }
  // Without reset(): the failed allocation flushes the queue, the pool gives back, the retry fits.
  EXPECT_NO_THROW({ managed_memory managed = m.memallocmanaged(192 * MiB, true); });
  int const before = pool.trims;
  EXPECT_THROW((void)m.memalloc(512 * MiB), out_of_memory);
  EXPECT_EQ(pool.trims, before + 1) << "the out-of-memory retry gave the pool back first";
  set_memory_manager({});
}

// --- a memory pointer destroyed at exit ----------------------------------------------------------

memory_pointer kept_until_exit;  // a user's global: constructed before gpumem's statics

TEST(manager_exit, a_global_memory_pointer_is_freed_at_exit_without_a_crash) {
  // The death test re-runs this executable; under compute-sanitizer that child is instrumented
  // too and outlasts the sanitizer run's time limit.
  if (std::getenv("GPUMEM_UNDER_SANITIZER") != nullptr)
    GTEST_SKIP() << "a death test (a second process) under compute-sanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        kept_until_exit = current_context().memory_manager().memalloc(MiB);
        std::exit(0);  // destroys it after every function-local static of gpumem
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace gpumem
