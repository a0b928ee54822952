// How EMM memory of a resource_memory_manager goes back: memalloc_unowned's blocks (memalloc's
// memory without an owner record, freed by unowned()->deallocate_deferred through the same queue),
// and retired frees at reset(), close() and close_for_device_reset().
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "counted_device.hpp"
#include "dead_context_backend.hpp"
#include "log_capture.hpp"

namespace gpumem {
namespace {

using test::counted_device;
using test::dead_context_device;

// Retires one batch of `bytes` frees: the count limit + 1 pointers dropped.
void retire_a_batch(memory_manager& m, std::size_t bytes) {
  std::size_t const count = m.owning_context().pending_deallocations().max_count() + 1;
  for (std::size_t i = 0; i < count; ++i)
    (void)m.memalloc(bytes);
}

class emm_unowned : public ::testing::TestWithParam<char const*> {};

TEST_P(emm_unowned, memalloc_unowned_is_counted_and_its_free_queued_like_memallocs) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  unowned_blocks* const blocks = m.unowned();
  ASSERT_NE(blocks, nullptr);
  EXPECT_EQ(m.memalloc_unowned(0), nullptr);
  { memory_pointer warm = m.memalloc(64 * KiB); }  // the pool waits once when it grows
  ctx.pending_deallocations().flush();
  device.reset_counts();
  void* const a = m.memalloc_unowned(4 * KiB);
  void* const b = m.memalloc_unowned(8 * KiB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  memory_statistics s = m.get_memory_statistics();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.bytes_in_use, 12 * KiB);
  blocks->deallocate_deferred(a, 4 * KiB);
  s = m.get_memory_statistics();
  EXPECT_EQ(s.pending_count, 1u) << "the EMM rule: queued, not freed";
  EXPECT_EQ(s.bytes_in_use, 12 * KiB);
  EXPECT_EQ(device.waits(), 0);
  void* const c = m.memalloc_unowned(4 * KiB);
  EXPECT_NE(c, a) << "a block whose free is queued was handed out";
  EXPECT_EQ(ctx.pending_deallocations().flush(), 1u);
  EXPECT_EQ(device.counter->device_synchronizations, 1);
  blocks->deallocate_deferred(b, 8 * KiB);
  blocks->deallocate_deferred(c, 4 * KiB);
  EXPECT_EQ(ctx.pending_deallocations().flush(), 2u);
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
}

TEST_P(emm_unowned, a_deferred_free_after_close_is_released_at_once) {
  counted_device device(256 * MiB);
  set_memory_manager(load_memory_manager(GetParam()));
  memory_manager& m = get_context(0).memory_manager();
  void* const p = m.memalloc_unowned(KiB);
  std::shared_ptr<unowned_blocks> const kept = m.unowned()->shared_from_this();
  close(0);
  test::error_log_capture log;
  device.reset_counts();
  kept->deallocate_deferred(p, KiB);
  EXPECT_EQ(device.counter->device_synchronizations, 1) << "at once, behind the barrier";
  EXPECT_TRUE(log.errors().empty()) << log.errors().front();
  set_memory_manager({});
  close();
}

TEST_P(emm_unowned, reset_releases_retired_frees_with_one_synchronisation) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  retire_a_batch(m, KiB);
  (void)m.memalloc(KiB);  // and one queued
  ASSERT_GT(ctx.pending_deallocations().retired_size(), 0u);
  device.reset_counts();
  m.reset();
  // The async manager waits once more, so that the driver sees those frees complete before its
  // pool gives memory back.
  EXPECT_EQ(device.counter->device_synchronizations, GetParam() == std::string("async") ? 2 : 1);
  memory_statistics const s = m.get_memory_statistics();
  EXPECT_EQ(s.retired_count + s.pending_count, 0u);
  EXPECT_EQ(s.bytes_in_use, 0u);
}

TEST_P(emm_unowned, close_releases_retired_frees_behind_one_synchronisation) {
  counted_device device(256 * MiB);
  std::size_t const free_at_start = device.inner->get_memory_info().free;
  set_memory_manager(load_memory_manager(GetParam()));
  retire_a_batch(get_context(0).memory_manager(), 4 * KiB);
  ASSERT_GT(get_context(0).pending_deallocations().retired_size(), 0u);
  device.reset_counts();
  close(0);
  EXPECT_GE(device.counter->device_synchronizations, 1);
  if (std::string(GetParam()) == "pool") {
    EXPECT_EQ(device.inner->get_memory_info().free, free_at_start)
        << "the pool could give its chunk back: the retired blocks were released first";
  }
  set_memory_manager({});
  close();
}

INSTANTIATE_TEST_SUITE_P(builtins, emm_unowned, ::testing::Values("pool", "async"));

TEST(emm_unowned_default, the_default_manager_has_no_unowned_memalloc) {
  context ctx(0, load_memory_manager("default"));
  EXPECT_EQ(ctx.memory_manager().unowned(), nullptr);
  EXPECT_THROW((void)ctx.memory_manager().memalloc_unowned(KiB), not_supported);
}

// Numba's cuda.close(): retired frees go back while the CUDA context lives (the pool then gives
// every chunk back), and nothing touches the device after its reset.
TEST(emm_unowned_device_reset, retired_frees_are_released_before_the_reset) {
  dead_context_device device(256 * MiB);
  std::size_t const free_at_start = device.inner->get_memory_info().free;
  set_memory_manager(load_memory_manager("pool"));
  memory_manager& m = get_context(0).memory_manager();
  retire_a_batch(m, 4 * KiB);
  void* const unowned = m.memalloc_unowned(4 * KiB);
  std::shared_ptr<unowned_blocks> kept = m.unowned()->shared_from_this();
  kept->deallocate_deferred(unowned, 4 * KiB);  // queued
  ASSERT_GT(get_context(0).pending_deallocations().retired_size(), 0u);
  close_for_device_reset(0);
  EXPECT_EQ(device.inner->get_memory_info().free, free_at_start)
      << "retired or queued blocks kept a chunk of the reset context";
  device.counter->dead = true;  // cuDevicePrimaryCtxReset
  kept.reset();                 // the pool goes with its last reference
  device.counter->dead = false;
  set_memory_manager({});
  close();
  EXPECT_EQ(device.counter->calls_after_death.load(), 0);
}

}  // namespace
}  // namespace gpumem
