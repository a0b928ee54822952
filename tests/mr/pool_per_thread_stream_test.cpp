// pool_resource on the per-thread default stream (cudaStreamPerThread: one handle naming each
// thread's own stream). The system hands a joined thread's id to the next thread it creates, so the
// pool must not let a new thread inherit what a dead one freed while its stream's work still runs.
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace gpumem {
namespace {

using test::pool_test;

bool overlap(void* a, void* b, std::size_t bytes) {
  auto const x = reinterpret_cast<std::uintptr_t>(a);
  auto const y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

// Thread 1 allocates on its per-thread stream, queues work that stays pending (a closed gate: the
// stand-in for a kernel that writes the block later), frees the block and exits. Thread 2 (often
// given thread 1's id) allocates the same size on its per-thread stream while that work is still
// pending: it must get other memory. Then, once the work has run, the memory is reusable.
void exited_thread_keeps_its_blocks_until_its_work_ran(memory_resource& upstream,
                                                       std::size_t bytes) {
  pool_resource pool(upstream, {});
  stream_handle const per_thread = backend().per_thread_default_stream();
  test::stream_gate gate;
  void* first = nullptr;
  std::thread::id first_id;
  std::thread t1([&] {
    first_id = std::this_thread::get_id();
    first = pool.allocate(bytes, per_thread);
    gate.block(per_thread);
    backend().fill_async(first, 0x5a, bytes, per_thread);  // runs after the gate opens
    pool.deallocate(first, bytes, per_thread);
  });
  t1.join();
  void* second = nullptr;
  bool same_id = false;
  std::thread t2([&] {
    same_id = std::this_thread::get_id() == first_id;
    second = pool.allocate(bytes, per_thread);
    pool.deallocate(second, bytes, per_thread);
  });
  t2.join();
  EXPECT_FALSE(overlap(first, second, bytes))
      << "a new thread (same id as the exited one: " << same_id
      << ") got memory the exited thread freed while its stream's work was pending";
  gate.open();
  backend().synchronize();
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().live_bytes, 0u);
  EXPECT_GT(pool.trim(), 0u);
  EXPECT_EQ(pool.statistics().held_bytes, 0u)
      << "the exited threads' memory stayed theirs after their work completed";
}

TEST_F(pool_test, exited_thread_large_blocks_wait_for_its_stream) {
  exited_thread_keeps_its_blocks_until_its_work_ran(upstream, 16 * MiB);
}

TEST_F(pool_test, exited_thread_cached_blocks_wait_for_its_stream) {
  exited_thread_keeps_its_blocks_until_its_work_ran(upstream, 64 * KiB);
}

// Many short-lived threads on their per-thread streams: the pool keeps no state for each one that
// has gone (its memory is free for all once its stream is idle).
TEST_F(pool_test, exited_threads_leave_no_stream_state) {
  pool_resource pool(upstream, {});
  stream_handle const per_thread = backend().per_thread_default_stream();
  for (int i = 0; i < 64; ++i) {
    std::thread t([&] {
      void* small = pool.allocate(4 * KiB, per_thread);
      void* large = pool.allocate(8 * MiB, per_thread);
      pool.deallocate(small, 4 * KiB, per_thread);
      pool.deallocate(large, 8 * MiB, per_thread);
      backend().synchronize_stream(per_thread);
    });
    t.join();
  }
  pool.check_invariants();
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  EXPECT_EQ(pool.statistics().stream_bytes, 0u);
}

}  // namespace
}  // namespace gpumem
