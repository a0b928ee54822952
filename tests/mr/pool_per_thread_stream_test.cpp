// pool_resource on the per-thread default stream (cudaStreamPerThread: one handle naming each
// thread's own stream). The system hands a joined thread's id to the next thread it creates, so the
// pool must not let a new thread inherit what a dead one freed while its stream's work still runs.
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"
#include "resource_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <future>
#include <thread>

namespace gpumem {
namespace {

using test::pool_test;

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
  EXPECT_FALSE(test::overlap(first, bytes, second, bytes))
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
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  exited_thread_keeps_its_blocks_until_its_work_ran(upstream, 16 * MiB);
}

TEST_F(pool_test, exited_thread_cached_blocks_wait_for_its_stream) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  exited_thread_keeps_its_blocks_until_its_work_ran(upstream, 64 * KiB);
}

// Once the work of exited threads has run, the pool keeps no state for them: nothing freed on
// their streams stays theirs, and everything goes back to the upstream.
void expect_exited_threads_forgotten(pool_resource& pool) {
  backend().synchronize();
  pool.check_invariants();
  pool.trim();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.stream_bytes, 0u) << "memory freed by an exited thread stayed its own";
  EXPECT_EQ(st.held_bytes, 0u);
  EXPECT_EQ(st.streams, 0u) << "the pool kept state for exited threads";
}

// Many short-lived threads on their per-thread streams, idle or with work pending when they exit:
// the pool keeps no state for one that has gone once its memory is free for all.
TEST_F(pool_test, exited_threads_leave_no_stream_state) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  pool_resource pool(upstream, {});
  stream_handle const per_thread = backend().per_thread_default_stream();
  test::stream_gate gate;
  for (int i = 0; i < 64; ++i) {
    std::thread t([&, i] {
      void* small = pool.allocate(4 * KiB, per_thread);
      void* large = pool.allocate(8 * MiB, per_thread);
      if (i % 2 == 0) gate.block(per_thread);  // half exit with their stream held back
      pool.deallocate(small, 4 * KiB, per_thread);
      pool.deallocate(large, 8 * MiB, per_thread);
    });
    t.join();
  }
  EXPECT_GE(pool.statistics().streams, 32u) << "entries of streams with pending work were dropped";
  gate.open();
  expect_exited_threads_forgotten(pool);
}

// release_stream(cudaStreamPerThread) from threads that never allocated on it (a bridge that
// gives back "the current stream" at a worker's teardown): the entry it makes for the thread's
// stream must go with the thread, as the entries of threads that allocated there do.
TEST_F(pool_test, exited_threads_that_only_released_their_stream_leave_no_stream_state) {
  pool_resource pool(upstream, {});
  for (int i = 0; i < 64; ++i) {
    std::thread t([&] { pool.release_stream(backend().per_thread_default_stream()); });
    t.join();
  }
  // A later stream's entry reaps the retired ones.
  void* p = pool.allocate(4 * KiB, a);
  pool.deallocate(p, 4 * KiB, a);
  pool.release_stream(a);
  expect_exited_threads_forgotten(pool);
}

// A thread_local destroyed after the pool's table of thread caches (constructed before it) may
// still allocate and free on the thread's per-thread stream, also after the pool forgot the
// thread's first entry: what it frees there must not stay the dead thread's for good.
struct late_user {
  pool_resource* pool = nullptr;
  std::function<void()> before;  // runs first in the destructor
  ~late_user() {
    if (pool == nullptr) return;
    if (before) before();
    stream_handle const per_thread = backend().per_thread_default_stream();
    void* small = pool->allocate(64 * KiB, per_thread);
    void* large = pool->allocate(8 * MiB, per_thread);
    pool->deallocate(small, 64 * KiB, per_thread);
    pool->deallocate(large, 8 * MiB, per_thread);
  }
};
thread_local late_user late;

TEST_F(pool_test, frees_from_late_thread_local_destructors_are_not_stranded) {
  pool_resource pool(upstream, {});
  std::promise<void> entered;
  std::promise<void> go;
  std::thread t([&] {
    late.pool = &pool;  // constructed now: destroyed after the pool's table of thread caches
    late.before = [&] {
      entered.set_value();
      go.get_future().wait();
    };
    stream_handle const per_thread = backend().per_thread_default_stream();
    void* p = pool.allocate(1 * MiB, per_thread);
    pool.deallocate(p, 1 * MiB, per_thread);
    backend().synchronize_stream(per_thread);
  });
  entered.get_future().wait();
  pool.trim();  // forgets the thread's settled, empty entry
  go.set_value();
  t.join();
  expect_exited_threads_forgotten(pool);
}

}  // namespace
}  // namespace gpumem
