// memory_pointer::release_idle: a caller that knows a block is idle frees it at once. On the
// managers over a resource (pool, async) the last owner's block goes back to the resource without
// entering the deferred queue and without a device synchronisation, and is reusable at once; a
// shared pointer, a defer_cleanup() guard and the default manager take the usual deferred path.
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gtest/gtest.h>

#include <string>

#include "counted_device.hpp"

namespace gpumem {
namespace {

class release_idle : public ::testing::TestWithParam<char const*> {};

TEST_P(release_idle, frees_the_last_owner_at_once_without_the_queue_or_a_synchronisation) {
  test::counted_device device(64 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  { memory_pointer warm = m.memalloc(64 * KiB); }  // the pool grows once (a stream wait)
  queue.flush();
  device.reset_counts();
  std::size_t const queued = queue.size();
  memory_pointer p = m.memalloc(64 * KiB);
  void* const address = p.device_pointer();
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 64 * KiB);
  EXPECT_TRUE(p.release_idle());
  EXPECT_FALSE(p) << "the pointer is empty afterwards";
  EXPECT_EQ(p.device_pointer(), nullptr);
  EXPECT_EQ(queue.size(), queued) << "an idle free does not enter the deferred queue";
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u) << "the block went back at once";
  EXPECT_EQ(device.counter->device_synchronizations, 0) << "no device synchronisation";
  memory_pointer again = m.memalloc(64 * KiB);
  if (std::string(GetParam()) == "pool") {
    EXPECT_EQ(again.device_pointer(), address) << "the block is reusable at once";
  }
  EXPECT_TRUE(again.release_idle());
  EXPECT_EQ(queue.size(), queued);
}

TEST_P(release_idle, a_shared_pointer_and_a_deferral_keep_the_deferred_path) {
  test::counted_device device(64 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  queue.flush();
  std::size_t const queued = queue.size();

  memory_pointer p = m.memalloc(4 * KiB);
  memory_pointer view = p.view(1024, 1024);  // another owner of the same block
  EXPECT_FALSE(p.release_idle());
  EXPECT_FALSE(p);
  EXPECT_EQ(queue.size(), queued) << "the view still owns the block";
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 4 * KiB);
  view = memory_pointer();  // the last owner, dropped plainly: queued as usual
  EXPECT_EQ(queue.size(), queued + 1);

  memory_pointer held = m.memalloc(4 * KiB);
  {
    cleanup_guard guard = m.defer_cleanup();
    EXPECT_FALSE(held.release_idle()) << "inside defer_cleanup() nothing is freed";
    EXPECT_EQ(queue.size(), queued + 2);
  }
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 8 * KiB) << "both frees still queued";
  queue.flush();
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);

  memory_pointer empty;
  EXPECT_FALSE(empty.release_idle());
}

TEST_P(release_idle, a_stream_ordered_block_is_freed_on_its_stream) {
  test::counted_device device(64 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  stream_handle const s = backend().create_stream(true);
  memory_pointer p = m.allocate(8 * KiB, s);
  EXPECT_TRUE(p.release_idle());
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
  m.release_stream(s);
  backend().destroy_stream(s);
}

INSTANTIATE_TEST_SUITE_P(builtins, release_idle, ::testing::Values("pool", "async"));

TEST(release_idle_fallback, the_default_manager_defers_as_for_a_plain_drop) {
  test::counted_device device(64 * MiB);
  context ctx(0, load_memory_manager("default"));
  memory_pointer p = ctx.memory_manager().memalloc(4 * KiB);
  EXPECT_FALSE(p.release_idle());
  EXPECT_FALSE(p);
  EXPECT_EQ(ctx.pending_deallocations().size(), 1u) << "the free took the deferred queue";
  EXPECT_EQ(device.counter->device_synchronizations, 0);
  ctx.pending_deallocations().flush();
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
}

}  // namespace
}  // namespace gpumem
