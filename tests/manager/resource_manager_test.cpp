// resource_memory_manager's EMM side (the "pool" and "async" built-ins and plugins over a
// resource): memalloc waits for nothing, frees are queued on the context's pending_deallocations
// (Numba's count and ratio limits, held by defer_cleanup), and each flush makes exactly one device
// synchronisation before returning the batch to the resource. A free after close() is harmless.
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/memory_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "counted_device.hpp"
#include "dead_context_backend.hpp"
#include "log_capture.hpp"
#include "scoped_backend.hpp"
#include "stream_gate.hpp"

namespace gpumem {
namespace {

using test::counted_device;
using test::dead_context_device;

// Every call straight to the backend (a freed block is gone at once): the simplest resource for
// the out-of-memory path.
class backend_resource final : public memory_resource {
 public:
  std::string name() const override { return "backend_resource"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override {
    return bytes == 0 ? nullptr : backend().allocate(bytes);
  }
  void do_deallocate(void* ptr, std::size_t, stream_handle) noexcept override {
    try {
      if (ptr != nullptr) backend().deallocate(ptr);
    } catch (...) {
    }
  }
};

// The pool waits once for a stream-ordered upstream when it grows (not per call): grow it first.
void warm_up(memory_manager& m, pending_deallocations& queue) {
  { memory_pointer warm = m.memalloc(64 * KiB); }
  queue.flush();
}

class resource_manager_emm : public ::testing::TestWithParam<char const*> {};

TEST_P(resource_manager_emm, memalloc_does_not_wait_and_frees_wait_once_per_release) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  std::size_t const limit = queue.max_count();
  ASSERT_GE(limit, 2u);
  warm_up(m, queue);
  device.reset_counts();
  std::set<void*> pending;
  for (std::size_t i = 0; i < limit; ++i) {
    memory_pointer p = m.memalloc(4 * KiB);
    ASSERT_NE(p.device_pointer(), nullptr);
    pending.insert(p.device_pointer());
  }
  EXPECT_EQ(device.waits(), 0) << "neither memalloc nor a drop waits for the device";
  EXPECT_EQ(queue.size(), limit) << "every drop queued its free";
  memory_statistics st = m.get_memory_statistics();
  EXPECT_EQ(st.pending_count, limit);
  EXPECT_EQ(st.bytes_in_use, limit * 4 * KiB) << "queued frees still count as in use";
  {
    memory_pointer fresh = m.memalloc(4 * KiB);
    EXPECT_EQ(pending.count(fresh.device_pointer()), 0u)
        << "a block whose free is still queued was handed out again";
    pending.insert(fresh.device_pointer());
  }  // the limit + 1st item: the queue retires its batch, without a wait
  EXPECT_EQ(queue.size(), 0u) << "the pending count drops at Numba's threshold";
  EXPECT_EQ(queue.retired_size(), limit + 1);
  EXPECT_EQ(device.waits(), 0);
  st = m.get_memory_statistics();
  EXPECT_EQ(st.retired_count, limit + 1);
  EXPECT_EQ(st.retired_bytes, (limit + 1) * 4 * KiB);
  EXPECT_EQ(st.bytes_in_use, (limit + 1) * 4 * KiB) << "retired blocks are not back yet";
  // Batches retire until the retired list passes its limit; no retired block is handed out
  // before the one synchronisation that releases them all.
  std::size_t frees = limit + 1;
  while (device.counter->device_synchronizations == 0) {
    memory_pointer p = m.memalloc(4 * KiB);
    ASSERT_EQ(pending.count(p.device_pointer()), 0u)
        << "a retired block was handed out before the device synchronisation";
    pending.insert(p.device_pointer());
    ++frees;
    ASSERT_LE(frees, queue.max_retired_count() + limit + 1) << "the retired list never released";
  }
  EXPECT_EQ(device.counter->device_synchronizations, 1) << "one synchronisation for many batches";
  EXPECT_EQ(device.counter->stream_synchronizations, 0);
  EXPECT_EQ(frees % (limit + 1), 0u) << "released when a batch retired";
  EXPECT_GT(frees, queue.max_retired_count()) << "not before the retired list passed its limit";
  EXPECT_EQ(queue.size() + queue.retired_size(), 0u);
  st = m.get_memory_statistics();
  EXPECT_EQ(st.bytes_in_use, 0u);
  EXPECT_EQ(st.allocations, 0u);
  EXPECT_EQ(st.total_allocations, frees + 1);
}

TEST_P(resource_manager_emm, defer_cleanup_holds_device_frees_until_the_guard_ends) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  std::size_t const items = 2 * queue.max_count() + 1;
  warm_up(m, queue);
  device.reset_counts();
  {
    cleanup_guard guard = m.defer_cleanup();
    for (std::size_t i = 0; i < items; ++i)
      (void)m.memalloc(KiB);
    EXPECT_EQ(queue.size(), items) << "past the count limit, nothing freed while deferred";
    m.reset();  // a no-op for the queue while deferred
    EXPECT_EQ(queue.size(), items);
    EXPECT_EQ(m.get_memory_statistics().bytes_in_use, items * KiB);
    EXPECT_EQ(device.waits(), 0);
  }
  EXPECT_EQ(queue.size(), 0u) << "the guard ended over the limit: one flush";
  EXPECT_EQ(device.counter->device_synchronizations, 1);
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
}

TEST_P(resource_manager_emm, the_byte_ratio_limit_flushes_too) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  std::size_t const half = queue.max_bytes() / 2 + 1;  // two of them pass the ratio's bytes
  ASSERT_GT(queue.max_count(), 2u);
  device.reset_counts();
  (void)m.memalloc(half);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.bytes(), half);
  (void)m.memalloc(half);
  EXPECT_EQ(queue.size(), 0u) << queue.bytes() << " bytes queued, limit " << queue.max_bytes();
  EXPECT_EQ(device.counter->device_synchronizations, 1);
}

TEST_P(resource_manager_emm, reset_flushes_with_one_synchronisation) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager(GetParam()));
  memory_manager& m = ctx.memory_manager();
  for (int i = 0; i < 3; ++i)
    (void)m.memalloc(KiB);
  device.reset_counts();
  m.reset();
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
  // The async manager waits once more, so that the driver sees those frees complete before its
  // pool gives memory back.
  EXPECT_EQ(device.counter->device_synchronizations, GetParam() == std::string("async") ? 2 : 1);
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
}

TEST_P(resource_manager_emm, a_free_after_close_is_released_at_once_and_never_throws) {
  counted_device device(256 * MiB);
  set_memory_manager(load_memory_manager(GetParam()));
  memory_pointer kept = get_context(0).memory_manager().memalloc(KiB);
  memory_pointer doomed = get_context(0).memory_manager().memalloc(KiB);
  close(0);
  test::error_log_capture log;
  device.reset_counts();
  kept = memory_pointer();
  EXPECT_EQ(device.counter->device_synchronizations, 1) << "released at once, after the barrier";
  EXPECT_TRUE(log.errors().empty()) << log.errors().front();
  // As a device whose CUDA context was reset under gpumem: the wait fails, the free is logged.
  device.counter->dead = true;
  EXPECT_NO_THROW(doomed = memory_pointer());
  device.counter->dead = false;
  // The barrier's failure, and for the pool (whose last pointer this was) its destructor's wait.
  std::vector<std::string> const errors = log.errors();
  ASSERT_GE(errors.size(), 1u);
  EXPECT_NE(errors.front().find("release barrier"), std::string::npos) << errors.front();
  for (std::string const& e : errors)
    EXPECT_NE(e.find("cudaErrorContextIsDestroyed"), std::string::npos) << e;
  set_memory_manager({});
  close();
}

// allocate_unowned (PyTorch's C interface): counted as allocate(), freed through unowned() on its
// stream, also after the context that made it is closed (the state outlives the manager).
TEST_P(resource_manager_emm, unowned_blocks_are_counted_and_freed_after_close_too) {
  counted_device device(256 * MiB);
  set_memory_manager(load_memory_manager(GetParam()));
  memory_manager& manager = get_context(0).memory_manager();
  ASSERT_NE(manager.unowned(), nullptr);
  EXPECT_EQ(manager.allocate_unowned(0, nullptr), nullptr);
  void* const a = manager.allocate_unowned(KiB, nullptr);
  void* const b = manager.allocate_unowned(2 * KiB, nullptr);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  memory_statistics s = manager.get_memory_statistics();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.bytes_in_use, 3 * KiB);
  EXPECT_EQ(s.pending_count, 0u);
  manager.unowned()->deallocate(a, KiB, nullptr);
  EXPECT_EQ(manager.get_memory_statistics().bytes_in_use, 2 * KiB);
  std::shared_ptr<unowned_blocks> const kept = manager.unowned()->shared_from_this();
  close(0);
  test::error_log_capture log;
  kept->deallocate(b, 2 * KiB, nullptr);  // after close: the pool lives on in the state
  EXPECT_TRUE(log.errors().empty()) << log.errors().front();
  set_memory_manager({});
  close();
}

INSTANTIATE_TEST_SUITE_P(builtins, resource_manager_emm, ::testing::Values("pool", "async"));

// close(device) (Numba's EMM reset, before cuda.close() resets the primary context): the queue is
// flushed and the pool gives back at once every chunk without a live block, while the context
// lives. Memory still live goes later; if the context was lost meanwhile, its free is logged and
// never throws.
TEST(resource_manager_close, close_gives_back_the_pools_free_chunks_before_a_context_loss) {
  counted_device device(256 * MiB);
  set_memory_manager(load_memory_manager("pool"));
  memory_pointer kept = get_context(0).memory_manager().memalloc(KiB);
  std::size_t const free_with_kept = backend().get_memory_info().free;
  memory_pointer doomed = get_context(0).memory_manager().memalloc(64 * MiB);
  EXPECT_LT(backend().get_memory_info().free, free_with_kept);
  doomed = memory_pointer();  // queued, not freed
  close(0);
  EXPECT_EQ(backend().get_memory_info().free, free_with_kept)
      << "the chunk of the block freed through the queue is still held after close";
  test::error_log_capture log;
  device.counter->dead = true;  // the CUDA context was reset under gpumem
  EXPECT_NO_THROW(kept = memory_pointer());
  device.counter->dead = false;
  set_memory_manager({});
  close();
}

// Numba's cuda.close(): close_for_device_reset(device), then the CUDA context is reset. Memory
// still owned by live objects (small and large blocks, EMM and stream-ordered, on a stream that
// has fences) is dropped afterwards without any call on the dead context's memory, streams or
// events, with at most one log line and no error.
TEST(resource_manager_close, after_a_device_reset_late_frees_make_no_device_call) {
  dead_context_device device(256 * MiB);
  std::size_t const free_at_start = device.inner->get_memory_info().free;
  set_memory_manager(load_memory_manager("pool"));
  stream_handle const stream = backend().create_stream(true);
  memory_manager& m = get_context(0).memory_manager();
  std::vector<memory_pointer> kept;
  kept.push_back(m.memalloc(80));
  kept.push_back(m.memalloc(8 * MiB));
  kept.push_back(m.allocate(KiB, stream));
  kept.push_back(m.allocate(6 * MiB, stream));
  for (int i = 0; i < 64; ++i)  // frees on the stream: blocks back to its arena, fences
    memory_pointer churn = m.allocate(MiB, stream);
  {
    memory_pointer queued = m.memalloc(40 * MiB);  // freed through the queue at close
  }
  std::vector<std::string> lines;
  auto previous =
      set_log_sink([&lines](log_level, std::string_view message) { lines.emplace_back(message); });
  close_for_device_reset(0);
  EXPECT_LT(device.inner->get_memory_info().free, free_at_start) << "the live blocks' chunks";
  std::size_t const free_after_close = device.inner->get_memory_info().free;
  device.counter->dead = true;  // cuDevicePrimaryCtxReset
  EXPECT_NO_THROW(kept.clear());
  device.counter->dead = false;
  set_log_sink(std::move(previous));
  EXPECT_EQ(device.counter->calls_after_death.load(), 0) << "a late free touched the dead context";
  EXPECT_LE(lines.size(), 1U) << (lines.empty() ? std::string() : lines.front());
  EXPECT_EQ(device.inner->get_memory_info().free, free_after_close)
      << "memory of the reset context was given back by address";
  backend().destroy_stream(stream);
  set_memory_manager({});
  close();
}

// close(device) while the CUDA context lives on (a manager replaced): the pool gives back at once
// what it can, and the chunks of blocks still live when the last of them goes; none of those
// frees names its stream (which the caller may have destroyed after its last use).
TEST(resource_manager_close, after_a_retiring_close_live_chunks_go_back_with_the_last_block) {
  dead_context_device device(256 * MiB);
  std::size_t const free_at_start = device.inner->get_memory_info().free;
  set_memory_manager(load_memory_manager("pool"));
  stream_handle const stream = backend().create_stream(true);
  memory_manager& m = get_context(0).memory_manager();
  memory_pointer small = m.allocate(KiB, stream);
  memory_pointer large = m.memalloc(8 * MiB);
  { memory_pointer queued = m.memalloc(40 * MiB); }
  close(0);
  EXPECT_LT(device.inner->get_memory_info().free, free_at_start);
  small = memory_pointer();
  backend().destroy_stream(stream);  // after its last free, before the pool goes
  EXPECT_LT(device.inner->get_memory_info().free, free_at_start);
  large = memory_pointer();  // the pool goes with its last block
  EXPECT_EQ(device.inner->get_memory_info().free, free_at_start);
  set_memory_manager({});
  close();
}

TEST(resource_manager_emm_recovery, out_of_memory_flushes_the_queue_and_retries_once) {
  counted_device device(16 * MiB);
  context ctx(0, [](context& c) {
    return std::make_unique<resource_memory_manager>(c, std::make_shared<backend_resource>());
  });
  memory_manager& m = ctx.memory_manager();
  (void)m.memalloc(3 * MiB);  // queued: below both limits on a 16 MiB device
  ASSERT_EQ(ctx.pending_deallocations().size(), 1u);
  device.reset_counts();
  memory_pointer big = m.memalloc(14 * MiB);
  EXPECT_NE(big.device_pointer(), nullptr);
  EXPECT_EQ(ctx.pending_deallocations().size(), 0u);
  EXPECT_EQ(device.counter->device_synchronizations, 1);
  EXPECT_EQ(m.get_memory_statistics().out_of_memory_retries, 1u);
  {
    cleanup_guard guard = m.defer_cleanup();
    big = memory_pointer();
    EXPECT_THROW((void)m.memalloc(14 * MiB), out_of_memory)
        << "inside defer_cleanup() the queued free is not flushed, as Numba";
  }
}

// Retired frees (a batch that passed the count limit) hold memory until one synchronisation:
// out-of-memory releases them before the retry.
TEST(resource_manager_emm_recovery, out_of_memory_releases_retired_frees_before_the_retry) {
  counted_device device(16 * MiB);
  context ctx(0, [](context& c) {
    return std::make_unique<resource_memory_manager>(c, std::make_shared<backend_resource>());
  });
  memory_manager& m = ctx.memory_manager();
  pending_deallocations& queue = ctx.pending_deallocations();
  for (std::size_t i = 0; i <= queue.max_count(); ++i)
    (void)m.memalloc(16 * KiB);  // 176 KiB retired: within 1/16 of the ratio's bytes
  ASSERT_EQ(queue.size(), 0u);
  ASSERT_EQ(queue.retired_size(), queue.max_count() + 1);
  device.reset_counts();
  memory_pointer big = m.memalloc(16 * MiB - 64 * KiB);  // fits only without the retired blocks
  EXPECT_NE(big.device_pointer(), nullptr);
  EXPECT_EQ(queue.retired_size(), 0u);
  EXPECT_EQ(device.counter->device_synchronizations, 1);
  EXPECT_EQ(m.get_memory_statistics().out_of_memory_retries, 1u);
}

TEST(resource_manager_streams, a_reused_stream_handle_does_not_alias_in_the_pool_manager) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager("pool"));
  memory_manager& m = ctx.memory_manager();
  stream_handle const s = backend().create_stream(true);
  {
    test::stream_gate gate;
    gate.block(s);  // the old stream's work is still pending when it "goes"
    void* old_block = nullptr;
    {
      memory_pointer p = m.allocate(4 * KiB, s);
      old_block = p.device_pointer();
    }  // freed on s: reusable at once by s alone
    EXPECT_EQ(m.allocate(4 * KiB, s).device_pointer(), old_block) << "stream order on s";
    device.counter->recycle(s);  // destroyed, and a new stream created at its address
    memory_pointer fresh = m.allocate(4 * KiB, s);
    EXPECT_NE(fresh.device_pointer(), old_block)
        << "the new stream was handed a block the old stream's pending work may still use";
    fresh = memory_pointer();
    gate.open();
  }
  m.release_stream(s);  // reachable from the manager: the pool forgets the released stream
  backend().destroy_stream(s);
}

TEST(resource_manager_streams, streams_created_released_and_destroyed_leave_nothing_behind) {
  counted_device device(256 * MiB);
  context ctx(0, load_memory_manager("pool"));
  memory_manager& m = ctx.memory_manager();
  for (int round = 0; round < 30; ++round) {
    stream_handle const s = backend().create_stream(true);
    { memory_pointer p = m.allocate(64 * KiB, s); }
    m.release_stream(s);
    backend().destroy_stream(s);
  }
  m.reset();
  EXPECT_EQ(m.get_memory_statistics().held_bytes, 0u)
      << "memory of released streams stayed parked in the pool";
}

// GPUMEM_POOL_MAX_CACHED_SIZE sets the pool manager's cached limit: a block of 1 MiB + 1 byte is
// rounded to its size class (1.125 MiB) below a 4 MiB limit, and served to 256 bytes above the
// default one.
TEST(resource_manager_pool_options, the_pool_managers_cached_limit_comes_from_the_environment) {
  EXPECT_EQ(environment_snapshot().pool_max_cached_size, pool_options{}.max_cached_size)
      << "the variable's default is the pool's own";
  counted_device device(256 * MiB);
  auto block_bytes = [] {
    context ctx(0, load_memory_manager("pool"));
    auto& m = dynamic_cast<resource_memory_manager&>(ctx.memory_manager());
    auto* pool = dynamic_cast<owning_adaptor<pool_resource>*>(&m.resource());
    EXPECT_NE(pool, nullptr) << "the pool manager's resource is its pool";
    if (pool == nullptr) return std::size_t{0};
    memory_pointer p = m.memalloc(MiB + 1);
    return pool->adaptor().statistics().live_bytes;
  };
  EXPECT_EQ(block_bytes(), MiB + 256);
  ::setenv("GPUMEM_POOL_MAX_CACHED_SIZE", "4MiB", 1);
  reload_environment();
  std::size_t const cached = block_bytes();
  ::unsetenv("GPUMEM_POOL_MAX_CACHED_SIZE");
  reload_environment();
  EXPECT_EQ(cached, MiB + MiB / 8);
}

// A double free through unowned() (a C caller's mistake) is caught by the pool, or by the debug
// tracker with GPUMEM_DEBUG_MEMORY, and ignored; the manager's counts must not take it as a free
// (report_refused_deallocation): they would go below the live bytes and later wrap.
TEST(resource_manager, a_double_free_through_unowned_is_not_counted) {
  for (bool debug : {false, true}) {
    ::setenv("GPUMEM_DEBUG_MEMORY", debug ? "1" : "0", 1);
    reload_environment();
    context ctx(0, load_memory_manager("pool"));
    ::unsetenv("GPUMEM_DEBUG_MEMORY");
    reload_environment();
    memory_manager& m = ctx.memory_manager();
    void* const keep = m.allocate_unowned(4096, nullptr);
    for (std::size_t bytes : {std::size_t{1000}, std::size_t{8 * MiB}}) {
      void* const p = m.allocate_unowned(bytes, nullptr);
      m.unowned()->deallocate(p, bytes, nullptr);
      m.unowned()->deallocate(p, bytes, nullptr);  // ignored below
      memory_statistics const s = m.get_memory_statistics();
      EXPECT_EQ(s.bytes_in_use, 4096u) << bytes << " B, debug " << debug;
      EXPECT_EQ(s.allocations, 1u) << bytes << " B, debug " << debug;
    }
    m.unowned()->deallocate(keep, 4096, nullptr);
    EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
  }
}

}  // namespace
}  // namespace gpumem
