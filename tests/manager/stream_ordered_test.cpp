// The manager additions for stream-passing frameworks (CuPy, PyTorch): allocate(bytes, stream),
// release_stream, get_memory_statistics, and close(device).
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/manager/pool_manager_hooks.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <thread>

#include "counted_device.hpp"
#include "scoped_backend.hpp"

namespace gpumem {
namespace {

// A resource that allocates on the current device, as cudaMalloc does.
class current_device_resource final : public memory_resource {
 public:
  std::string name() const override { return "current_device_resource"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override { return backend().allocate(bytes); }
  void do_deallocate(void* ptr, std::size_t, stream_handle) noexcept override {
    backend().deallocate(ptr);
  }
};

// The current-device questions of ten allocations and frees (owned and unowned) on `s` once the
// pool has grown (its growth selects the device).
int device_queries_of_warm_calls(memory_manager& m, stream_handle s, test::counted_device& device) {
  { memory_pointer warm = m.allocate(4 * KiB, s); }
  device.counter->device_queries = 0;
  for (int i = 0; i < 10; ++i) {
    memory_pointer p = m.allocate(4 * KiB, s);
    void* const q = m.allocate_unowned(8 * KiB, s);
    m.unowned()->deallocate(q, 8 * KiB, s);
  }
  return device.counter->device_queries;
}

// The pool belongs to its device and selects it itself where a call needs it, so the manager asks
// nothing of the device per allocation or free (on a GPU each question is a cudaGetDevice); over
// a resource that allocates on the current device, the manager makes its device current around
// every call.
TEST(stream_ordered, a_pool_manager_asks_for_no_current_device_per_call) {
  if (debug_memory_enabled())
    GTEST_SKIP() << "GPUMEM_DEBUG_MEMORY puts the tracking adaptor over the pool, which makes "
                    "the pool's device current to poison each freed block";
  test::counted_device device(64 * MiB);
  context ctx(0, load_memory_manager("pool"));
  memory_manager& m = ctx.memory_manager();
  stream_handle const s = backend().create_stream(true);
  EXPECT_EQ(device_queries_of_warm_calls(m, s, device), 0);

  context plain(0, [](context& c) {
    return std::make_unique<resource_memory_manager>(c,
                                                     std::make_shared<current_device_resource>());
  });
  device.counter->device_queries = 0;
  { memory_pointer p = plain.memory_manager().allocate(4 * KiB, s); }
  EXPECT_EQ(device.counter->device_queries, 2) << "one per allocation, one per free";
  m.release_stream(s);
  backend().destroy_stream(s);
}

// The same through adaptors over the pool: each forwards selects_own_device, so the manager calls
// a stack over a pool as it calls the pool.
TEST(stream_ordered, a_manager_over_adaptors_over_a_pool_asks_for_no_current_device_per_call) {
  if (debug_memory_enabled())
    GTEST_SKIP() << "GPUMEM_DEBUG_MEMORY puts the tracking adaptor over the stack, which makes "
                    "the pool's device current to poison each freed block";
  test::counted_device device(64 * MiB);
  std::ostringstream log;
  context ctx(0, [&log](context& c) {
    auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>());
    resource_memory_manager::hooks hooks = pool_manager_hooks(pool->adaptor());
    auto stats = make_owning_adaptor<statistics_adaptor>(std::move(pool));
    auto limited = make_owning_adaptor<limit_adaptor>(std::move(stats), 32 * MiB);
    auto retried = make_owning_adaptor<failure_callback_adaptor>(
        std::move(limited), [](std::size_t, int) { return false; });
    std::shared_ptr<memory_resource> logged =
        make_owning_adaptor<logging_adaptor>(std::move(retried), log);
    return std::make_unique<resource_memory_manager>(c, std::move(logged), std::move(hooks));
  });
  memory_manager& m = ctx.memory_manager();
  stream_handle const s = backend().create_stream(true);
  EXPECT_EQ(device_queries_of_warm_calls(m, s, device), 0);
  m.release_stream(s);
  backend().destroy_stream(s);
}

TEST(stream_ordered, pool_manager_counts_allocations_on_a_stream_and_frees_on_drop) {
  test::scoped_backend device(64 * MiB);
  context ctx(0, load_memory_manager("pool"));
  memory_manager& m = ctx.memory_manager();
  stream_handle const s = backend().create_stream(true);
  {
    memory_pointer a = m.allocate(3 * KiB, s);
    memory_pointer b = m.allocate(MiB, s);
    ASSERT_NE(a.device_pointer(), nullptr);
    ASSERT_NE(b.device_pointer(), nullptr);
    memory_statistics const st = m.get_memory_statistics();
    EXPECT_EQ(st.bytes_in_use, 3 * KiB + MiB);
    EXPECT_EQ(st.allocations, 2u);
    EXPECT_EQ(st.total_allocations, 2u);
    EXPECT_GE(st.held_bytes, st.bytes_in_use) << "the pool holds at least what it handed out";
  }
  memory_statistics const after = m.get_memory_statistics();
  EXPECT_EQ(after.bytes_in_use, 0u);
  EXPECT_EQ(after.allocations, 0u);
  EXPECT_EQ(after.total_allocations, 2u);
  EXPECT_EQ(after.peak_bytes, 3 * KiB + MiB);
  EXPECT_GT(after.held_bytes, 0u) << "the pool keeps its chunk";
  m.release_stream(s);  // the pool gives back what it kept for s
  backend().destroy_stream(s);
  EXPECT_EQ(m.allocate(0, nullptr).device_pointer(), nullptr);
}

TEST(stream_ordered, a_per_thread_stream_block_freed_by_another_thread_waits_for_the_device) {
  // The per-thread default stream names the calling thread's own stream: freed from another
  // thread, the block cannot be ordered on the stream it was used on, so it takes the deferred
  // queue (released after a device synchronisation), as memalloc's blocks do.
  test::scoped_backend device(64 * MiB);
  context ctx(0, load_memory_manager("pool"));
  memory_manager& m = ctx.memory_manager();
  stream_handle const own = backend().per_thread_default_stream();
  pending_deallocations& queue = ctx.pending_deallocations();
  { memory_pointer here = m.allocate(KiB, own); }
  EXPECT_EQ(queue.size(), 0u) << "freed on its own thread: on its stream, at once";
  memory_pointer there = m.allocate(KiB, own);
  std::thread([&] { there = memory_pointer(); }).join();
  EXPECT_EQ(queue.size(), 1u) << "freed by another thread: through the queue";
  queue.flush();
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
}

TEST(stream_ordered, default_manager_serves_allocate_through_memalloc_with_deferred_frees) {
  test::scoped_backend device(64 * MiB);
  context ctx(0, [](context& c) { return std::make_unique<default_memory_manager>(c); });
  memory_manager& m = ctx.memory_manager();
  { memory_pointer a = m.allocate(KiB, nullptr); }
  memory_statistics const st = m.get_memory_statistics();
  EXPECT_EQ(st.pending_count, 1u) << "the default manager defers the free";
  EXPECT_EQ(st.bytes_in_use, KiB) << "queued frees still count as in use";
  EXPECT_EQ(st.held_bytes, KiB);
  m.release_stream(nullptr);  // nothing kept per stream: a no-op
  EXPECT_EQ(ctx.pending_deallocations().flush(), 1u);
  EXPECT_EQ(m.get_memory_statistics().bytes_in_use, 0u);
  // No unowned path: the C bridges fall back to allocate().
  EXPECT_EQ(m.unowned(), nullptr);
  EXPECT_THROW(m.allocate_unowned(KiB, nullptr), not_supported);
}

TEST(stream_ordered, out_of_memory_on_a_stream_keeps_the_requested_bytes) {
  test::scoped_backend device(8 * MiB);
  context ctx(0, load_memory_manager("pool"));
  try {
    (void)ctx.memory_manager().allocate(64 * MiB, nullptr);
    FAIL() << "64 MiB cannot come from an 8 MiB device";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 64 * MiB);
  }
}

TEST(stream_ordered, close_one_device_leaves_the_others_and_keeps_live_memory_valid) {
  test::scoped_backend device(64 * MiB);
  set_memory_manager(load_memory_manager("pool"));
  context* const first = &get_context(0);
  memory_pointer live = first->memory_manager().allocate(KiB, nullptr);
  close(0);
  close(0);  // closing a device without a context is a no-op
  EXPECT_EQ(live.size(), KiB) << "memory outlives its closed context";
  memory_pointer fresh = get_context(0).memory_manager().allocate(KiB, nullptr);
  EXPECT_EQ(get_context(0).memory_manager().get_memory_statistics().total_allocations, 1u)
      << "a new context, with a new manager, serves device 0 after close(0)";
  live = memory_pointer();  // freed into the old pool, which the pointer kept alive
  fresh = memory_pointer();
  set_memory_manager({});
  close();
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

// The Python bridge's pool: a pool with a maximum below the request, a trim on out-of-memory and
// one retry. The caller gets out_of_memory with the requested bytes, from both entry points.
TEST(stream_ordered, pool_manager_with_a_maximum_reports_out_of_memory) {
  auto factory = [](context& c) -> std::unique_ptr<memory_manager> {
    pool_options options;
    options.maximum_size = 8 * MiB;
    auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>(), options);
    pool_resource* raw = &pool->adaptor();
    resource_memory_manager::hooks hooks;
    hooks.on_out_of_memory = [raw](std::size_t) {
      raw->trim();
      return true;
    };
    return std::make_unique<resource_memory_manager>(
        c, std::shared_ptr<memory_resource>(std::move(pool)), std::move(hooks), "pool");
  };
  context ctx(0, factory);
  memory_manager& m = ctx.memory_manager();
  for (int entry = 0; entry < 2; ++entry) {
    try {
      memory_pointer p = entry == 0 ? m.allocate(64 * MiB, nullptr) : m.memalloc(64 * MiB);
      ADD_FAILURE() << "a 64 MiB allocation from a pool of at most 8 MiB succeeded";
    } catch (out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), 64 * MiB) << e.what();
    }
  }
  memory_pointer small = m.allocate(MiB, nullptr);
  EXPECT_NE(small.device_pointer(), nullptr) << "the pool works after the failures";
}

}  // namespace
}  // namespace gpumem
