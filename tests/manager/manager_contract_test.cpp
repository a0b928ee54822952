// The contract every memory manager keeps: one typed suite, instantiated for the default manager,
// a plugin built on host_only_memory_manager, resource_memory_manager over a trivial resource and
// the built-ins (host_only, pool, async). A new manager is a fixture struct plus one line in
// `manager_types`.
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/memory_resource.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "log_capture.hpp"
#include "test_plugin_manager.hpp"

namespace gpumem {
namespace {

// The simplest resource: every call goes to the backend.
class backend_resource final : public memory_resource {
 public:
  std::string name() const override { return "backend_resource"; }
  memory_info get_memory_info() const override { return backend().get_memory_info(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override {
    return bytes == 0 ? nullptr : backend().allocate(bytes);
  }
  void do_deallocate(void* ptr, std::size_t, stream_handle) noexcept override {
    if (ptr == nullptr) return;
    try {
      backend().deallocate(ptr);
    } catch (...) {
    }
  }
};

struct default_manager_fixture {
  static memory_manager_factory factory() {
    return [](context& c) { return std::make_unique<default_memory_manager>(c); };
  }
  static constexpr bool has_memory_info = true;
  static constexpr bool supports_ipc = true;
  static constexpr bool keeps_freed_memory = false;
  static constexpr bool counts_memory = true;
};

struct plugin_manager_fixture {
  static memory_manager_factory factory() {
    return [](context& c) { return std::make_unique<test::test_plugin_manager>(c); };
  }
  static constexpr bool has_memory_info = false;
  static constexpr bool supports_ipc = true;
  static constexpr bool keeps_freed_memory = false;
  // get_memory_statistics() counts the device memory it hands out (the test plugin does not).
  static constexpr bool counts_memory = false;
};

struct resource_manager_fixture {
  static memory_manager_factory factory() {
    return [](context& c) {
      return std::make_unique<resource_memory_manager>(c, std::make_shared<backend_resource>());
    };
  }
  static constexpr bool has_memory_info = true;
  static constexpr bool supports_ipc = true;
  static constexpr bool keeps_freed_memory = false;
  static constexpr bool counts_memory = true;
};

struct builtin_host_only_fixture {
  static memory_manager_factory factory() { return load_memory_manager("host_only"); }
  static constexpr bool has_memory_info = true;
  static constexpr bool supports_ipc = true;
  static constexpr bool keeps_freed_memory = false;
  static constexpr bool counts_memory = true;
};

template <class Fixture>
class manager_contract : public ::testing::Test {
 protected:
  memory_manager& manager() { return ctx.memory_manager(); }
  pending_deallocations& queue() { return ctx.pending_deallocations(); }

  // Writes a pattern through the backend and reads it back.
  static void expect_round_trip(void* device_ptr, std::size_t bytes, std::uint8_t seed) {
    std::vector<std::uint8_t> in(bytes), out(bytes, 0);
    for (std::size_t i = 0; i < bytes; ++i)
      in[i] = static_cast<std::uint8_t>(seed + i * 7);
    backend().copy(device_ptr, in.data(), bytes);
    backend().copy(out.data(), device_ptr, bytes);
    EXPECT_EQ(in, out);
  }

  context ctx{0, Fixture::factory()};
};

// The built-ins that stand on mr/ resources ("pool": pool_resource over cudaMalloc chunks;
// "async": cudaMallocAsync). Both report memory info: the pool adds what it holds free to what the
// device has free.
struct builtin_pool_fixture {
  static memory_manager_factory factory() { return load_memory_manager("pool"); }
  static constexpr bool has_memory_info = true;
  static constexpr bool supports_ipc = true;
  // Freed blocks stay in the pool (until reset() trims it), so they can be read back on either
  // backend.
  static constexpr bool keeps_freed_memory = true;
  static constexpr bool counts_memory = true;
};

struct builtin_async_fixture {
  static memory_manager_factory factory() { return load_memory_manager("async"); }
  static constexpr bool has_memory_info = true;
  // CUDA's legacy IPC cannot export memory of a stream-ordered pool.
  static constexpr bool supports_ipc = false;
  static constexpr bool keeps_freed_memory = false;
  static constexpr bool counts_memory = true;
};

using manager_types =
    ::testing::Types<default_manager_fixture, plugin_manager_fixture, resource_manager_fixture,
                     builtin_host_only_fixture, builtin_pool_fixture, builtin_async_fixture>;
TYPED_TEST_SUITE(manager_contract, manager_types);

TYPED_TEST(manager_contract, memalloc_gives_distinct_aligned_non_overlapping_memory) {
  std::vector<memory_pointer> held;
  for (std::size_t bytes : {1u, 7u, 255u, 256u, 1000u, 4096u, 65537u, 3u, 1u << 20})
    held.push_back(this->manager().memalloc(bytes));
  std::vector<std::size_t> order(held.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return held[a].device_pointer() < held[b].device_pointer();
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    memory_pointer const& p = held[order[i]];
    ASSERT_NE(p.device_pointer(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.device_pointer()) % 256, 0u);
    EXPECT_EQ(p.use_count(), 1);
    EXPECT_EQ(&p.owning_context(), &this->ctx);
    if (i + 1 < order.size()) {
      auto const end = static_cast<char*>(p.device_pointer()) + p.size();
      EXPECT_LE(end, static_cast<char*>(held[order[i + 1]].device_pointer()));
    }
  }
  this->expect_round_trip(held.back().device_pointer(), held.back().size(), 3);
}

TYPED_TEST(manager_contract, memory_statistics_count_the_device_memory_live) {
  if (!TypeParam::counts_memory) GTEST_SKIP() << "this manager does not count its memory";
  memory_statistics const before = this->manager().get_memory_statistics();
  {
    memory_pointer const a = this->manager().memalloc(1 * MiB);
    memory_pointer const b = this->manager().memalloc(3000);
    memory_statistics const live = this->manager().get_memory_statistics();
    EXPECT_EQ(live.bytes_in_use, before.bytes_in_use + 1 * MiB + 3000);
    EXPECT_EQ(live.allocations, before.allocations + 2);
    EXPECT_EQ(live.total_allocations, before.total_allocations + 2);
    EXPECT_GE(live.peak_bytes, live.bytes_in_use);
    EXPECT_GE(live.held_bytes, live.bytes_in_use);
  }
  this->queue().flush();
  memory_statistics const after = this->manager().get_memory_statistics();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.allocations, before.allocations);
}

TYPED_TEST(manager_contract, memalloc_of_zero_bytes_is_a_null_pointer) {
  memory_pointer p = this->manager().memalloc(0);
  EXPECT_EQ(p.device_pointer(), nullptr);
  EXPECT_EQ(p.size(), 0u);
}

TYPED_TEST(manager_contract, memhostalloc_unmapped_is_pinned_host_memory) {
  host_memory m = this->manager().memhostalloc(4096, host_alloc_flags{});
  ASSERT_NE(m.host_pointer(), nullptr);
  EXPECT_EQ(m.size(), 4096u);
  EXPECT_FALSE(m.is_mapped());
  EXPECT_THROW((void)m.device_pointer(), logic_error);
  std::memset(m.host_pointer(), 0x5a, 4096);
  EXPECT_EQ(static_cast<unsigned char*>(m.host_pointer())[4095], 0x5a);
}

TYPED_TEST(manager_contract, memhostalloc_mapped_is_visible_through_its_device_pointer) {
  host_alloc_flags flags;
  flags.mapped = true;
  host_memory m = this->manager().memhostalloc(1024, flags);
  ASSERT_TRUE(m.is_mapped());
  ASSERT_NE(m.device_pointer(), nullptr);
  std::vector<std::uint8_t> pattern(1024);
  for (std::size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<std::uint8_t>(i * 13);
  std::memcpy(m.host_pointer(), pattern.data(), pattern.size());
  std::vector<std::uint8_t> seen(1024, 0);
  backend().copy(seen.data(), m.device_pointer(), seen.size());
  EXPECT_EQ(seen, pattern);
}

TYPED_TEST(manager_contract, mempin_keeps_the_owner_alive_until_unpinned_at_once) {
  for (bool mapped : {false, true}) {
    auto owner = std::make_shared<std::vector<char>>(8192, 'x');
    std::weak_ptr<std::vector<char>> watch = owner;
    void* const data = owner->data();
    {
      host_memory pinned = this->manager().mempin(owner, data, owner->size(), mapped);
      owner.reset();
      EXPECT_EQ(pinned.host_pointer(), data);
      EXPECT_EQ(pinned.is_mapped(), mapped);
      if (mapped) {
        EXPECT_NE(pinned.device_pointer(), nullptr);
      }
      EXPECT_FALSE(watch.expired());
    }
    // Unpinned when the last owner goes, not queued (Numba's _pin_finalizer): the owner goes too.
    EXPECT_EQ(this->queue().size(), 0u);
    EXPECT_TRUE(watch.expired()) << "mapped=" << mapped;
  }
  EXPECT_THROW((void)this->manager().mempin(nullptr, nullptr, 10, false), logic_error);
}

TYPED_TEST(manager_contract, mempin_may_pin_the_same_range_again_at_once_even_when_deferred) {
  auto owner = std::make_shared<std::vector<char>>(4096, 'y');
  cleanup_guard guard = this->manager().defer_cleanup();
  for (int round = 0; round < 3; ++round) {
    bool const mapped = round % 2 == 1;
    // A second registration of a range still pinned would fail ("already registered").
    host_memory pinned = this->manager().mempin(owner, owner->data(), owner->size(), mapped);
    EXPECT_EQ(pinned.host_pointer(), owner->data());
  }
  EXPECT_EQ(this->queue().size(), 0u) << "defer_cleanup() does not hold unpinning";
}

TYPED_TEST(manager_contract, a_failed_unpin_is_logged_not_thrown) {
  auto owner = std::make_shared<std::vector<char>>(4096, 'z');
  test::error_log_capture log;
  {
    host_memory pinned = this->manager().mempin(owner, owner->data(), owner->size(), false);
    backend().unregister_host(owner->data());  // as a context reset under the pointer would
  }
  ASSERT_EQ(log.errors().size(), 1u);
  // The host backend says "not registered", CUDA "cudaErrorHostMemoryNotRegistered".
  EXPECT_NE(log.errors().front().find("egistered"), std::string::npos) << log.errors().front();
}

TYPED_TEST(manager_contract, memallocmanaged_is_usable_from_the_host) {
  for (bool attach_global : {true, false}) {
    managed_memory m = this->manager().memallocmanaged(4096, attach_global);
    ASSERT_NE(m.host_pointer(), nullptr);
    EXPECT_EQ(m.host_pointer(), m.device_pointer());
    auto* bytes = static_cast<unsigned char*>(m.host_pointer());
    for (int i = 0; i < 4096; ++i)
      bytes[i] = static_cast<unsigned char>(i);
    EXPECT_EQ(bytes[4095], static_cast<unsigned char>(4095));
  }
}

TYPED_TEST(manager_contract, initialize_is_idempotent_and_comes_before_the_first_memalloc) {
  std::unique_ptr<memory_manager> fresh = TypeParam::factory()(this->ctx);
  fresh->initialize();
  fresh->initialize();
  {
    memory_pointer p = fresh->memalloc(512);
    this->expect_round_trip(p.device_pointer(), 512, 1);
    fresh->initialize();  // must not invalidate earlier state
    this->expect_round_trip(p.device_pointer(), 512, 2);
  }
  fresh->reset();
}

TYPED_TEST(manager_contract, reset_may_come_before_initialize) {
  std::unique_ptr<memory_manager> fresh = TypeParam::factory()(this->ctx);
  EXPECT_NO_THROW(fresh->reset());
  fresh->initialize();
  memory_pointer p = fresh->memalloc(64);
  EXPECT_NE(p.device_pointer(), nullptr);
}

TYPED_TEST(manager_contract, memory_info_is_reported_or_not_supported) {
  if constexpr (TypeParam::has_memory_info) {
    memory_info const info = this->manager().get_memory_info();
    EXPECT_GT(info.total, 0u);
    EXPECT_LE(info.free, info.total);
  } else {
    EXPECT_THROW((void)this->manager().get_memory_info(), not_supported);
  }
}

TYPED_TEST(manager_contract, defer_cleanup_nests_and_defers_host_frees) {
  std::size_t const items = this->queue().max_count() + 2;
  {
    cleanup_guard outer = this->manager().defer_cleanup();
    {
      cleanup_guard inner = this->manager().defer_cleanup();
      for (std::size_t i = 0; i < items; ++i)
        (void)this->manager().memhostalloc(64, host_alloc_flags{});
      EXPECT_EQ(this->queue().size(), items);
    }
    EXPECT_TRUE(this->queue().is_deferred());
    this->manager().reset();  // a no-op while deferred
    EXPECT_EQ(this->queue().size(), items);
  }
  EXPECT_FALSE(this->queue().is_deferred());
  EXPECT_EQ(this->queue().size(), 0u) << "the outermost guard ends over the count limit";
  this->queue().check_invariants();
}

TYPED_TEST(manager_contract, reset_releases_what_is_pending) {
  (void)this->manager().memhostalloc(64, host_alloc_flags{});
  EXPECT_EQ(this->queue().size(), 1u);
  this->manager().reset();
  EXPECT_EQ(this->queue().size(), 0u);
}

TYPED_TEST(manager_contract, interface_version_is_one_and_the_name_is_set) {
  EXPECT_EQ(this->manager().interface_version(), 1);
  EXPECT_FALSE(this->manager().name().empty());
}

TYPED_TEST(manager_contract, ipc_handle_of_a_view_records_its_offset) {
  memory_pointer p = this->manager().memalloc(4096);
  memory_pointer v = p.view(512, 100);
  if (!TypeParam::supports_ipc) {
    EXPECT_THROW((void)this->manager().get_ipc_handle(v), not_supported);
    return;
  }
  ipc_handle h = this->manager().get_ipc_handle(v);
  // The offset is from the base of the driver's allocation (a pool hands out pieces of chunks).
  address_range const range = backend().get_address_range(v.device_pointer());
  EXPECT_EQ(h.offset(), static_cast<std::size_t>(static_cast<char*>(v.device_pointer()) -
                                                 static_cast<char*>(range.base)));
  EXPECT_GE(h.offset(), 512u);
  EXPECT_EQ(h.size(), 100u);
  EXPECT_EQ(h.source_process(), static_cast<std::int64_t>(::getpid()));
  EXPECT_EQ(h.source(), backend().identity(0));
  EXPECT_EQ(p.use_count(), 3) << "the handle keeps the exported memory alive";
  EXPECT_THROW((void)h.open(this->ctx), logic_error) << "opening in the exporting process";
}

// Sizes no manager can serve: SIZE_MAX, sizes whose rounding to 256 bytes, pages or 2 MiB would
// wrap, and those at and past 2^63 (see the resource contract suite).
std::vector<std::size_t> sizes_that_wrap() {
  constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
  constexpr std::size_t half = std::size_t{1} << 63;
  return {top, top - 1, top - 255, top - 256, top - 4096, top - 2 * MiB, half, half + 1};
}

// Runs `call`, which must throw out_of_memory naming exactly `bytes`.
template <class Call>
void expect_out_of_memory(Call&& call, std::size_t bytes, char const* what) {
  try {
    call();
    ADD_FAILURE() << what << "(" << bytes << ") returned memory";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), bytes) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos)
        << what << ": " << e.what();
  }
}

TYPED_TEST(manager_contract, sizes_that_would_wrap_are_out_of_memory_naming_the_request) {
  std::vector<std::size_t> sizes = sizes_that_wrap();
  for (std::size_t const bytes : sizes) {
    expect_out_of_memory([&] { (void)this->manager().memalloc(bytes); }, bytes, "memalloc");
    expect_out_of_memory([&] { (void)this->manager().memhostalloc(bytes, host_alloc_flags{}); },
                         bytes, "memhostalloc");
    expect_out_of_memory([&] { (void)this->manager().memallocmanaged(bytes, true); }, bytes,
                         "memallocmanaged");
  }
  // Below max_allocation_bytes, past the largest device: the managers' own recovery (flush, hook,
  // retry) runs and the error still names the request, not a rounded block.
  for (std::size_t const bytes : {max_allocation_bytes, (std::size_t{1} << 62) + 1}) {
    expect_out_of_memory([&] { (void)this->manager().memalloc(bytes); }, bytes, "memalloc");
    expect_out_of_memory([&] { (void)this->manager().memallocmanaged(bytes, false); }, bytes,
                         "memallocmanaged");
  }
  // A range to pin that wraps the address space is no range at all: a broken precondition.
  std::vector<char> page(4096);
  EXPECT_THROW((void)this->manager().mempin(nullptr, page.data(), sizes.front(), false),
               logic_error);
  // Nothing was lost on the way.
  memory_pointer p = this->manager().memalloc(4096);
  this->expect_round_trip(p.device_pointer(), 4096, 5);
}

// GPUMEM_DEBUG_MEMORY=1 for the life of a scope, through the environment table (as a user sets it
// before making contexts).
class debug_memory_on {
 public:
  debug_memory_on() {
    ::setenv("GPUMEM_DEBUG_MEMORY", "1", 1);
    reload_environment();
  }
  ~debug_memory_on() {
    ::unsetenv("GPUMEM_DEBUG_MEMORY");
    reload_environment();
  }
  debug_memory_on(debug_memory_on const&) = delete;
  debug_memory_on& operator=(debug_memory_on const&) = delete;
};

TYPED_TEST(manager_contract, debug_memory_tracks_poisons_and_catches_double_frees) {
  EXPECT_EQ(debug_tracker(this->manager()), nullptr) << "made without GPUMEM_DEBUG_MEMORY";
  std::unique_ptr<memory_manager> debugged;
  {
    debug_memory_on on;
    debugged = TypeParam::factory()(this->ctx);
  }
  debugged->initialize();
  tracking_adaptor* const tracker = debug_tracker(*debugged);
  ASSERT_NE(tracker, nullptr) << debugged->name() << " does not allocate through the debug adaptor";
  constexpr std::size_t bytes = 4096;
  void* freed = nullptr;
  {
    memory_pointer p = debugged->memalloc(bytes);
    freed = p.device_pointer();
    EXPECT_EQ(tracker->outstanding_bytes(), bytes);
    this->expect_round_trip(freed, bytes, 9);
  }
  // Poisoned before it went back: readable afterwards where the memory stays mapped (always in the
  // host backend's arena; on the GPU in the pool, until reset() gives its free chunks back).
  auto expect_poisoned = [&] {
    backend().synchronize();
    std::vector<std::uint8_t> seen(bytes);
    backend().copy(seen.data(), freed, bytes);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), std::uint8_t{0xDB}),
              static_cast<std::ptrdiff_t>(bytes))
        << "freed memory was not poisoned";
  };
  bool const checked = TypeParam::keeps_freed_memory && tracker->outstanding_bytes() == 0;
  if (checked) expect_poisoned();
  debugged->reset();  // a free the manager defers happens now
  backend().synchronize();
  EXPECT_EQ(tracker->outstanding_bytes(), 0u) << "the free did not go through the debug adaptor";
  if (!checked && backend().kind() == backend_kind::host) expect_poisoned();
  // Freeing the block again is caught, counted and not passed on to the allocator.
  tracker->deallocate(freed, bytes, nullptr);
  EXPECT_EQ(tracker->double_frees(), 1u);
  EXPECT_EQ(tracker->outstanding_bytes(), 0u);
}

}  // namespace
}  // namespace gpumem
