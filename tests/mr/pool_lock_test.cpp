// pool_lock (src/mr/pool_lock.hpp, private to the pool, compiled into this test): mutual exclusion
// among threads that contend for it (short sections, and a holder that sleeps so that the others
// sleep in the kernel too), try_lock, and no waiter left asleep when the lock is released.
#include "pool_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gpumem::detail {
namespace {

TEST(pool_lock, excludes_threads_that_contend_for_it) {
  pool_lock lock;
  std::uint64_t counter = 0;  // not atomic: the lock alone orders the increments
  std::uint64_t in_section = 0;
  bool overlapped = false;
  constexpr int threads = 8;
  constexpr int rounds = 20000;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard<pool_lock> held(lock);
        overlapped |= ++in_section != 1;
        ++counter;
        // Now and then a long section: the waiters spin out and sleep.
        if (i % 4096 == t) std::this_thread::sleep_for(std::chrono::microseconds(200));
        --in_section;
      }
    });
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(counter, std::uint64_t{threads} * rounds);
  EXPECT_FALSE(overlapped);
}

TEST(pool_lock, try_lock_fails_while_another_thread_holds_it) {
  pool_lock lock;
  ASSERT_TRUE(lock.try_lock());
  bool taken = true;
  std::thread([&] { taken = lock.try_lock(); }).join();
  EXPECT_FALSE(taken);
  lock.unlock();
  std::thread([&] {
    taken = lock.try_lock();
    if (taken) lock.unlock();
  }).join();
  EXPECT_TRUE(taken);
  std::unique_lock<pool_lock> again(lock, std::try_to_lock);
  EXPECT_TRUE(again.owns_lock());
}

TEST(pool_lock, wakes_every_sleeper_when_a_long_holder_lets_go) {
  pool_lock lock;
  lock.lock();
  std::atomic<int> done{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < 6; ++t)
    waiters.emplace_back([&] {
      std::lock_guard<pool_lock> held(lock);
      done.fetch_add(1);
    });
  // Long enough for every waiter to stop spinning and sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(done.load(), 0);
  lock.unlock();
  for (auto& w : waiters)
    w.join();  // a lost wake hangs here (ctest's timeout reports it)
  EXPECT_EQ(done.load(), 6);
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

}  // namespace
}  // namespace gpumem::detail
