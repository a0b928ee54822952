// Threads that create streams, use them (cached and large sizes, the null or their per-thread
// default stream too, blocks freed by other threads) and destroy them without release_stream,
// trimming now and then: the pool never names a destroyed stream (dead_stream_backend), stays
// consistent, and gives everything back at the end.
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "dead_stream_backend.hpp"
#include "pool_test_support.hpp"

namespace gpumem {
namespace {

// (wait_across_streams, expandable, per-thread default stream instead of the null stream)
class pool_dead_streams_threads : public ::testing::TestWithParam<int> {};

TEST_P(pool_dead_streams_threads, threads_destroying_their_streams_leave_nothing) {
  int const mode = GetParam();
  test::dead_stream_backend strict(backend());
  cuda_resource upstream;
  pool_options options;
  options.backend = &strict;
  options.maximum_size = 256 * MiB;
  options.chunk_size = 16 * MiB;
  options.fence_bytes = 1 * MiB;
  options.wait_across_streams = (mode & 1) != 0;
  options.expandable = (mode & 2) != 0;
  options.track_blocks = true;
  pool_resource pool(upstream, options);
  std::mutex shared_mutex;
  std::vector<std::pair<void*, std::size_t>> shared;  // freed by whichever thread comes next
  auto work = [&](int seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    stream_handle const other = (mode & 4) != 0 ? strict.per_thread_default_stream() : nullptr;
    for (int round = 0; round < 40; ++round) {
      stream_handle const s = strict.create_stream(true);
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < 60; ++i) {
        std::size_t const bytes = std::size_t{256} << (rng() % 16);  // 256 B to 8 MiB
        try {
          live.emplace_back(pool.allocate(bytes, rng() % 8 == 0 ? other : s), bytes);
        } catch (out_of_memory const&) {
        }
        if (!live.empty() && rng() % 2 == 0) {
          std::size_t const k = rng() % live.size();
          auto const [p, n] = live[k];
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          if (rng() % 5 == 0) {
            std::lock_guard<std::mutex> lock(shared_mutex);
            shared.emplace_back(p, n);
          } else {
            pool.deallocate(p, n, s);
          }
        }
        if (rng() % 50 == 0) pool.trim();
      }
      for (auto const& [p, n] : live)
        pool.deallocate(p, n, s);
      {
        std::lock_guard<std::mutex> lock(shared_mutex);
        for (auto const& [p, n] : shared)
          pool.deallocate(p, n, other);
        shared.clear();
      }
      strict.destroy_stream(s);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back(work, t + 1);
  for (auto& t : threads)
    t.join();
  pool.trim();
  pool.check_invariants();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.held_bytes, 0u);
  EXPECT_LE(st.streams, 4u);
  EXPECT_EQ(strict.dead_uses(), 0u) << "first: " << strict.first_dead_use();
}

INSTANTIATE_TEST_SUITE_P(all, pool_dead_streams_threads, ::testing::Range(0, 8));

// A created stream whose thread has exited holds memory no fence covers (an orphan). A miss on
// another stream must not wait for the device to free it: a third stream's work may wait for the
// allocating thread itself (here a gate that a helper thread opens after 2 s; if the allocation
// waited for the device, it would return only then). The orphans' memory comes back through a
// synchronisation on the pool's own thread.
using test::pool_test;
TEST_F(pool_test, a_miss_does_not_wait_for_a_stream_the_calling_thread_holds_back) {
  pool_options options;
  options.chunk_size = 8 * MiB;
  pool_resource pool(upstream, options);
  stream_handle const x = backend().create_stream(true);
  std::thread([&] { pool.deallocate(pool.allocate(6 * MiB, x), 6 * MiB, x); }).join();
  test::closed_gate gate(b);  // b's later work waits for this thread
  std::atomic<bool> opened{false};
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    opened = true;
    gate.open();
  });
  void* const p = pool.allocate(6 * MiB, a);  // misses: x's 6 MiB are a quarter of the pool
  EXPECT_FALSE(opened.load()) << "allocate on a waited for b, held back by the calling thread";
  opener.join();
  // The pool's own thread finishes its synchronisation once b's gate is open: x's memory is then
  // free for every stream, and another 6 MiB on a needs no growth.
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pool.statistics().synchronizations == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(pool.statistics().synchronizations, 1u);
  std::uint64_t const grown = pool.statistics().upstream_allocations;
  void* const q = pool.allocate(6 * MiB, a);
  EXPECT_EQ(pool.statistics().upstream_allocations, grown) << "x's memory did not come back";
  pool.deallocate(q, 6 * MiB, a);
  pool.deallocate(p, 6 * MiB, a);
  backend().synchronize();
  pool.check_invariants();
  pool.release_stream(x);
  backend().destroy_stream(x);
}

// Streams made, used for one block and destroyed without release_stream: each leaves a slab as an
// orphan. A miss waits a little for the synchronisation that frees the orphans' memory instead of
// growing at every such cycle (which grew the pool to the whole device), so what the pool holds
// stays bounded: the streams the thread's caches still name (at most 32, a slab each) and up to a
// quarter of the pool in orphans.
TEST_F(pool_test, streams_destroyed_without_release_leave_the_pool_bounded) {
  pool_resource pool(upstream);
  for (std::size_t const bytes : {std::size_t{1000}, std::size_t{300000}}) {
    for (int i = 0; i < 4000; ++i) {
      stream_handle const s = backend().create_stream(true);
      pool.deallocate(pool.allocate(bytes, s), bytes, s);
      backend().destroy_stream(s);
    }
    // About 320 MiB here; growing at every cycle, 1.2 GB per 2,000 streams. A synchronisation
    // slower than the wait (a loaded machine, a sanitizer) costs a growth, not a failure.
    EXPECT_LT(pool.statistics().held_bytes, 1 * GiB) << bytes << "-byte blocks";
  }
  pool.trim();
}

}  // namespace
}  // namespace gpumem
