// The default manager's deallocation behaviour: Numba's exact thresholds, flush-and-retry on
// out-of-memory, deferral, statistics. Small private host devices make the limits exact.
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "scoped_backend.hpp"

namespace gpumem {
namespace {

memory_manager_factory default_factory() {
  return [](context& c) { return std::make_unique<default_memory_manager>(c); };
}

default_memory_manager& as_default(context& ctx) {
  return dynamic_cast<default_memory_manager&>(ctx.memory_manager());
}

TEST(default_manager, ten_pending_frees_wait_the_eleventh_flushes) {
  test::scoped_backend device(64 * MiB);
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  ASSERT_EQ(ctx.pending_deallocations().max_count(), 10u)
      << "NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT";
  std::vector<memory_pointer> held;
  for (int i = 0; i < 11; ++i)
    held.push_back(manager.memalloc(KiB));
  for (int i = 0; i < 10; ++i)
    held[static_cast<std::size_t>(i)] = memory_pointer();
  EXPECT_EQ(ctx.pending_deallocations().size(), 10u);
  EXPECT_EQ(manager.get_statistics().frees, 0u) << "exactly 10 pending must not flush";
  EXPECT_EQ(manager.get_statistics().bytes_in_use, 11 * KiB) << "pending memory is still in use";
  held[10] = memory_pointer();
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
  EXPECT_EQ(manager.get_statistics().frees, 11u);
  EXPECT_EQ(manager.get_statistics().bytes_in_use, 0u);
}

TEST(default_manager, pending_bytes_equal_to_the_ratio_wait_one_byte_over_flushes) {
  test::scoped_backend device(5 * MiB);  // 0.2 of it is exactly 1 MiB
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  ASSERT_EQ(ctx.pending_deallocations().max_bytes(), MiB)
      << "NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO";
  (void)manager.memalloc(MiB);
  EXPECT_EQ(ctx.pending_deallocations().bytes(), MiB);
  EXPECT_EQ(manager.get_statistics().frees, 0u) << "bytes equal to the limit must not flush";
  (void)manager.memalloc(1);
  EXPECT_EQ(ctx.pending_deallocations().bytes(), 0u);
  EXPECT_EQ(manager.get_statistics().frees, 2u);
}

TEST(default_manager, out_of_memory_flushes_and_retries_once) {
  test::scoped_backend device(16 * MiB);
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  memory_pointer a = manager.memalloc(3 * MiB);
  memory_pointer b = manager.memalloc(12 * MiB);
  a = memory_pointer();  // 3 MiB pending: under the count and byte limits
  ASSERT_EQ(ctx.pending_deallocations().size(), 1u);
  memory_pointer c = manager.memalloc(3 * MiB);  // fits only once `a` is really freed
  EXPECT_NE(c.device_pointer(), nullptr);
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
  EXPECT_EQ(manager.get_statistics().out_of_memory_retries, 1u);
  EXPECT_EQ(manager.get_statistics().frees, 1u);
}

TEST(default_manager, the_out_of_memory_handler_runs_before_the_retry) {
  test::scoped_backend device(16 * MiB);
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  memory_pointer held = manager.memalloc(12 * MiB);
  std::size_t asked = 0;
  manager.set_out_of_memory_handler([&](std::size_t bytes) {
    asked = bytes;
    held = memory_pointer();  // what a spill manager does: give memory back
    ctx.pending_deallocations().flush();
    return true;
  });
  memory_pointer big = manager.memalloc(10 * MiB);
  EXPECT_EQ(asked, 10 * MiB);
  EXPECT_NE(big.device_pointer(), nullptr);
  manager.set_out_of_memory_handler({});
}

TEST(default_manager, inside_defer_cleanup_out_of_memory_does_not_flush) {
  test::scoped_backend device(16 * MiB);
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  memory_pointer a = manager.memalloc(3 * MiB);
  memory_pointer b = manager.memalloc(12 * MiB);
  {
    cleanup_guard guard = manager.defer_cleanup();
    a = memory_pointer();
    try {
      (void)manager.memalloc(3 * MiB);
      FAIL() << "expected out_of_memory";
    } catch (out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), 3 * MiB);
      EXPECT_EQ(e.allocator(), "default memory manager");
      EXPECT_EQ(e.current_bytes(), 15 * MiB);
      EXPECT_EQ(e.peak_bytes(), 15 * MiB);
      EXPECT_NE(std::string(e.what()).find("defer_cleanup"), std::string::npos) << e.what();
    }
    EXPECT_EQ(ctx.pending_deallocations().size(), 1u);
  }
  // Out of the guard, the same request succeeds through the flush.
  EXPECT_NE(manager.memalloc(3 * MiB).device_pointer(), nullptr);
}

TEST(default_manager, a_request_larger_than_the_device_is_out_of_memory_after_the_retry) {
  test::scoped_backend device(4 * MiB);
  context ctx(0, default_factory());
  EXPECT_THROW((void)ctx.memory_manager().memalloc(8 * MiB), out_of_memory);
}

TEST(default_manager, statistics_count_allocations_use_and_peak) {
  test::scoped_backend device(64 * MiB);
  context ctx(0, default_factory());
  default_memory_manager& manager = as_default(ctx);
  {
    memory_pointer a = manager.memalloc(1000);
    memory_pointer b = manager.memalloc(3000);
    auto s = manager.get_statistics();
    EXPECT_EQ(s.allocations, 2u);
    EXPECT_EQ(s.bytes_in_use, 4000u);
    EXPECT_EQ(s.peak_bytes, 4000u);
  }
  auto s = manager.get_statistics();
  EXPECT_EQ(s.pending_count, 2u);
  EXPECT_EQ(s.pending_bytes, 4000u);
  manager.reset();
  s = manager.get_statistics();
  EXPECT_EQ(s.pending_count, 0u);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.peak_bytes, 4000u);
  EXPECT_EQ(s.frees, 2u);
}

TEST(default_manager, memory_info_is_the_devices) {
  test::scoped_backend device(8 * MiB);
  context ctx(0, default_factory());
  memory_pointer p = ctx.memory_manager().memalloc(MiB);
  memory_info const info = ctx.memory_manager().get_memory_info();
  EXPECT_EQ(info.total, 8 * MiB);
  EXPECT_EQ(info.free, 7 * MiB);
}

TEST(default_manager, memory_that_outlives_its_context_is_freed_by_its_last_owner) {
  test::scoped_backend device(8 * MiB);
  memory_pointer survivor;
  {
    context ctx(0, default_factory());
    survivor = ctx.memory_manager().memalloc(2 * MiB);
  }
  EXPECT_EQ(backend().get_memory_info().free, 6 * MiB);
  survivor = memory_pointer();
  EXPECT_EQ(backend().get_memory_info().free, 8 * MiB);
}

TEST(default_manager, queue_limits_come_from_the_environment) {
  ::setenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "3", 1);
  ::setenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", "0.5", 1);
  reload_environment();
  {
    test::scoped_backend device(8 * MiB);
    context ctx(0, default_factory());
    EXPECT_EQ(ctx.pending_deallocations().max_count(), 3u);
    EXPECT_EQ(ctx.pending_deallocations().max_bytes(), 4 * MiB);
  }
  ::unsetenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT");
  ::unsetenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO");
  reload_environment();
}

}  // namespace
}  // namespace gpumem
