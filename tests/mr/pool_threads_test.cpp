// pool_resource with several threads: per-thread caches, the per-stream class lists (taken without
// the pool's mutex), growth without the mutex, thread exit, and frees from thread_local
// destructors.
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;

TEST_F(pool_test, thread_exit_returns_its_cache) {
  pool_resource pool(upstream, {});
  std::thread worker([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 50; ++i)
      blocks.push_back(pool.allocate(4 * KiB, a));
    for (void* p : blocks)
      pool.deallocate(p, 4 * KiB, a);
  });
  worker.join();
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().live_bytes, 0u);
  EXPECT_EQ(pool.statistics().allocations, 50u);
  backend().synchronize_stream(a);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u) << "blocks stayed in the dead thread's cache";
}

TEST_F(pool_test, threads_share_a_pool) {
  pool_resource pool(upstream, {});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      stream_handle s = t % 2 ? a : b;
      std::mt19937_64 rng(100 + t);
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < 5000; ++i) {
        if (live.size() < 64 && (live.empty() || rng() % 2)) {
          std::size_t const bytes = 256 + rng() % (64 * KiB);
          live.emplace_back(pool.allocate(bytes, s), bytes);
        } else {
          auto [p, bytes] = live.back();
          live.pop_back();
          pool.deallocate(p, bytes, s);
        }
      }
      for (auto [p, bytes] : live)
        pool.deallocate(p, bytes, s);
    });
  }
  for (auto& t : threads)
    t.join();
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().live_bytes, 0u);
  pool.release_stream(a);
  pool.release_stream(b);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
}

TEST_F(pool_test, threads_on_their_own_streams_take_each_others_memory_with_waits) {
  // wait_across_streams with four threads, each on a stream of its own, on large blocks whose
  // sizes keep changing: streams take each other's fenced extents (and wait for those fences)
  // while their threads carve and free their own; the pool stays consistent (ThreadSanitizer runs
  // this in CI). How many takes wait depends on timing: a fence found complete first hands its
  // extents to the free ones.
  pool_options options;
  options.wait_across_streams = true;
  options.max_cached_size = 1 * MiB;
  pool_resource pool(upstream, options);
  constexpr int thread_count = 4;
  std::vector<stream_handle> streams;
  for (int t = 0; t < thread_count; ++t)
    streams.push_back(backend().create_stream(true));
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(300 + t);
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < 3000; ++i) {
        if (live.size() < 12 && (live.empty() || rng() % 2)) {
          std::size_t const bytes = (2 + rng() % 30) * MiB + rng() % KiB;
          live.emplace_back(pool.allocate(bytes, streams[t]), bytes);
        } else {
          std::size_t const k = rng() % live.size();
          pool.deallocate(live[k].first, live[k].second, streams[t]);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (auto const& [p, bytes] : live)
        pool.deallocate(p, bytes, streams[t]);
    });
  for (auto& thread : threads)
    thread.join();
  pool.check_invariants();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  std::printf("%llu stream waits\n", static_cast<unsigned long long>(st.stream_waits));
  for (stream_handle s : streams) {
    pool.release_stream(s);
    backend().destroy_stream(s);
  }
  pool.check_invariants();
}

TEST_F(pool_test, same_size_churn_takes_the_shared_mutex_only_to_fill_the_cache) {
  pool_resource pool(upstream);
  for (int i = 0; i < 1000; ++i)
    pool.deallocate(pool.allocate(100 * KiB, a), 100 * KiB, a);
  EXPECT_LE(pool.statistics().lock_acquisitions, 2u);
  pool.check_invariants();
}

TEST_F(pool_test, overflows_to_and_refills_from_the_streams_class_lists_skip_the_pool_mutex) {
  // 64 KiB blocks: a thread cache keeps 32 and moves 16 at a time. Freeing 64 overflows twice to
  // the stream's class lists; allocating 64 again refills twice from them. Both go through the
  // stream's own lists lock: with one thread per stream, threads never meet on the pool's mutex
  // there (it used to be taken once per batch, four times here).
  pool_resource pool(upstream);
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i)
    blocks.push_back(pool.allocate(64 * KiB, a));
  std::uint64_t const carved = pool.statistics().lock_acquisitions;
  for (int round = 0; round < 3; ++round) {
    for (void* p : blocks)
      pool.deallocate(p, 64 * KiB, a);
    for (auto& p : blocks)
      p = pool.allocate(64 * KiB, a);
  }
  EXPECT_EQ(pool.statistics().lock_acquisitions, carved);
  EXPECT_EQ(std::set<void*>(blocks.begin(), blocks.end()).size(), blocks.size());
  for (void* p : blocks)
    pool.deallocate(p, 64 * KiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_thread_local_freed_after_the_cache_table_is_gone_goes_to_the_shared_path) {
  // A thread_local constructed before the thread's first pool call is destroyed after the pool's
  // per-thread table: its free must not touch the retired cache.
  struct frees_at_exit {
    pool_resource* pool = nullptr;
    void* block = nullptr;
    stream_handle stream = nullptr;
    ~frees_at_exit() {
      if (block != nullptr) pool->deallocate(block, 4096, stream);
    }
  };
  pool_resource pool(upstream);
  std::thread([&] {
    thread_local frees_at_exit holder;
    holder.pool = &pool;
    holder.stream = a;
    holder.block = pool.allocate(4096, a);
    pool.deallocate(pool.allocate(8192, a), 8192, a);
  }).join();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.allocations, 2u);
  EXPECT_EQ(st.deallocations, 2u);
  pool.check_invariants();
}

// An upstream whose allocate waits until the test lets it go.
class held_upstream final : public memory_resource {
 public:
  explicit held_upstream(memory_resource& inner) : inner_(inner) {}
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::future<void> entered() { return entered_.get_future(); }
  std::string name() const override { return "held_upstream"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    entered_.set_value();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return released_; });
    return inner_.allocate(bytes, stream);
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle stream) noexcept override {
    inner_.deallocate(p, bytes, stream);
  }
  bool do_is_equal(memory_resource const& other) const noexcept override { return this == &other; }

  memory_resource& inner_;
  std::promise<void> entered_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool released_ = false;
};

TEST_F(pool_test, growth_calls_the_upstream_without_the_pool_mutex) {
  // A cudaMalloc takes tens to hundreds of microseconds: holding the pool's mutex meanwhile made
  // every other thread that needed it wait. Here the upstream blocks until the test's other
  // thread has taken the mutex (statistics() does) while the growth is in flight.
  held_upstream held(upstream);
  pool_resource pool(held);
  std::future<void> entered = held.entered();
  auto grower = std::async(std::launch::async, [&] { return pool.allocate(1 * MiB, a); });
  ASSERT_EQ(entered.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto reader = std::async(std::launch::async, [&] { return pool.statistics().held_bytes; });
  bool const read_while_growing =
      reader.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  held.release();
  void* p = grower.get();
  EXPECT_TRUE(read_while_growing) << "statistics() waited for the upstream's allocate";
  EXPECT_EQ(reader.get(), 0u);  // the chunk is counted once it is in the pool
  EXPECT_GE(pool.statistics().held_bytes, 1 * MiB);
  pool.deallocate(p, 1 * MiB, a);
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
