// The deferred queue's retired list (pending_deallocations.hpp, "Retirement"): with a release
// barrier, a batch that passes Numba's limits leaves the queue without waiting, and retired
// batches are released together behind ONE barrier: past the retired limits, on flush(), at the
// end of a deferral over a limit, on close() and when the barrier is replaced. No item is released
// before a barrier that began after it was queued (threads, seeded model).
#include "log_capture.hpp"

#include <gpumem/manager/pending_deallocations.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

// A queue whose barrier and releases are counted; every release checks that a barrier ran since
// its item was queued.
struct counted_queue {
  counted_queue(std::size_t max_count, std::size_t max_bytes) : queue(max_count, max_bytes) {
    queue.set_release_barrier([this] { ++barriers; });
  }
  void enqueue(std::size_t bytes = 1) {
    int const barriers_at_enqueue = barriers;
    queue.enqueue(
        [this, barriers_at_enqueue] {
          EXPECT_GT(barriers, barriers_at_enqueue) << "released before a barrier covered it";
          ++released;
        },
        bytes);
  }
  void enqueue_batch() {  // the count limit + 1: the batch that passes it
    for (std::size_t i = 0; i <= queue.max_count(); ++i)
      enqueue();
  }
  int barriers = 0;
  std::size_t released = 0;
  pending_deallocations queue;  // last: its destructor runs what is left, with the counters alive
};

TEST(retired_deallocations, the_limits_are_multiples_of_numbas) {
  pending_deallocations queue(10, 1600);
  EXPECT_EQ(queue.max_retired_count(), 160u);
  EXPECT_EQ(queue.max_retired_bytes(), 100u);
  pending_deallocations huge(~std::size_t{0}, ~std::size_t{0});
  EXPECT_EQ(huge.max_retired_count(), ~std::size_t{0}) << "saturates instead of wrapping";
  pending_deallocations none(0, 0);
  EXPECT_EQ(none.max_retired_count(), 0u) << "every free flushes: nothing stays retired";
}

TEST(retired_deallocations, a_batch_past_the_count_limit_is_retired_without_the_barrier) {
  counted_queue q(10, 1u << 30);
  for (int i = 0; i < 10; ++i)
    q.enqueue();
  EXPECT_EQ(q.queue.size(), 10u);
  q.enqueue();  // the 11th
  EXPECT_EQ(q.queue.size(), 0u) << "the pending count drops at the limit, as Numba's";
  EXPECT_EQ(q.queue.bytes(), 0u);
  EXPECT_EQ(q.queue.retired_size(), 11u);
  EXPECT_EQ(q.queue.retired_bytes(), 11u);
  EXPECT_EQ(q.barriers, 0);
  EXPECT_EQ(q.released, 0u);
  q.queue.check_invariants();
}

TEST(retired_deallocations, past_the_retired_count_every_batch_goes_behind_one_barrier) {
  counted_queue q(10, 1u << 30);
  for (int batch = 0; batch < 14; ++batch)  // 154 items: within 160
    q.enqueue_batch();
  EXPECT_EQ(q.queue.retired_size(), 154u);
  EXPECT_EQ(q.barriers, 0);
  q.queue.check_invariants();
  q.enqueue_batch();  // 165 > 160
  EXPECT_EQ(q.barriers, 1);
  EXPECT_EQ(q.released, 165u);
  EXPECT_EQ(q.queue.retired_size(), 0u);
  EXPECT_EQ(q.queue.retired_bytes(), 0u);
  q.queue.check_invariants();
}

TEST(retired_deallocations, past_the_retired_bytes_too_and_at_once_for_a_large_batch) {
  counted_queue q(2, 1600);  // retired: at most 32 items, 100 bytes
  for (int batch = 0; batch < 3; ++batch) {
    for (int i = 0; i < 3; ++i)
      q.enqueue(10);
  }
  EXPECT_EQ(q.queue.retired_bytes(), 90u);
  EXPECT_EQ(q.barriers, 0);
  for (int i = 0; i < 3; ++i)
    q.enqueue(10);  // 120 retired bytes > 100
  EXPECT_EQ(q.barriers, 1);
  EXPECT_EQ(q.released, 12u);
  q.enqueue(900);
  q.enqueue(900);  // 1800 > 1600: a batch beyond the retired bytes by itself
  EXPECT_EQ(q.barriers, 2) << "a large batch waits for the device at once, as without retirement";
  EXPECT_EQ(q.released, 14u);
  q.queue.check_invariants();
}

TEST(retired_deallocations, flush_releases_retired_then_queued_behind_one_barrier) {
  pending_deallocations queue(2, 1u << 30);
  std::vector<std::string> order;
  queue.set_release_barrier([&order] { order.push_back("barrier"); });
  for (int i = 0; i < 3; ++i)
    queue.enqueue([&order, i] { order.push_back("retired " + std::to_string(i)); }, 1);
  queue.enqueue([&order] { order.push_back("queued"); }, 1);
  EXPECT_TRUE(order.empty());
  EXPECT_EQ(queue.flush(), 4u);
  EXPECT_EQ(order,
            (std::vector<std::string>{"barrier", "retired 0", "retired 1", "retired 2", "queued"}));
  EXPECT_EQ(queue.size() + queue.retired_size(), 0u);
  queue.check_invariants();
}

TEST(retired_deallocations, a_deferral_holds_retired_items_and_its_end_releases_them) {
  counted_queue q(10, 1u << 30);
  q.enqueue_batch();
  {
    cleanup_guard guard = q.queue.defer_cleanup();
    EXPECT_EQ(q.queue.flush(), 0u) << "inside defer_cleanup() nothing is released";
    for (int i = 0; i < 30; ++i)  // past the count limit: neither retired nor released
      q.enqueue();
    EXPECT_EQ(q.queue.size(), 30u);
    EXPECT_EQ(q.queue.retired_size(), 11u);
    EXPECT_EQ(q.released, 0u);
  }
  EXPECT_EQ(q.barriers, 1) << "the outermost guard ends over the limit: one barrier for all";
  EXPECT_EQ(q.released, 41u);
  q.enqueue_batch();
  {
    cleanup_guard guard = q.queue.defer_cleanup();
    q.enqueue();
  }
  EXPECT_EQ(q.barriers, 1) << "a guard ending within the limits releases nothing";
  EXPECT_EQ(q.queue.retired_size(), 11u);
  q.queue.check_invariants();
}

TEST(retired_deallocations, close_releases_retired_items_behind_the_barrier) {
  counted_queue q(10, 1u << 30);
  q.enqueue_batch();
  q.enqueue();
  q.queue.close();
  EXPECT_EQ(q.barriers, 1);
  EXPECT_EQ(q.released, 12u);
  q.enqueue();  // after close: at once, behind the barrier
  EXPECT_EQ(q.barriers, 2);
  EXPECT_EQ(q.released, 13u);
  q.queue.check_invariants();
}

TEST(retired_deallocations, replacing_the_barrier_releases_retired_items_behind_the_old_one) {
  pending_deallocations queue(2, 1u << 30);
  std::vector<std::string> order;
  queue.set_release_barrier([&order] { order.push_back("old barrier"); });
  for (int i = 0; i < 3; ++i)
    queue.enqueue([&order] { order.push_back("free"); }, 1);
  queue.set_release_barrier([&order] { order.push_back("new barrier"); });
  EXPECT_EQ(order, (std::vector<std::string>{"old barrier", "free", "free", "free"}));
  order.clear();
  for (int i = 0; i < 3; ++i)
    queue.enqueue([&order] { order.push_back("free"); }, 1);
  queue.set_release_barrier({});  // removed: nothing stays retired without one
  EXPECT_EQ(order, (std::vector<std::string>{"new barrier", "free", "free", "free"}));
  order.clear();
  for (int i = 0; i < 3; ++i)
    queue.enqueue([&order] { order.push_back("free"); }, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"free", "free", "free"}))
      << "without a barrier a batch past the limit is released at once";
  EXPECT_EQ(queue.retired_size(), 0u);
  queue.check_invariants();
}

// Threads enqueue, flush and defer at random; each release checks that the barrier that covered
// it (the last one its releasing thread ran) began after its item was queued.
TEST(retired_deallocations, no_item_is_released_before_a_barrier_that_began_after_it) {
  std::atomic<int> barriers_begun{0};
  std::atomic<std::size_t> released{0};
  std::atomic<std::size_t> early{0};
  thread_local int covering = 0;  // the barrier the releasing thread ran last
  std::size_t const threads = 4;
  std::size_t const per_thread = 3000;
  {
    pending_deallocations queue(5, 1u << 20);
    queue.set_release_barrier([&] { covering = barriers_begun.fetch_add(1) + 1; });
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(20260611 + t));
        for (std::size_t i = 0; i < per_thread; ++i) {
          int const queued_after = barriers_begun.load();
          queue.enqueue(
              [&, queued_after] {
                if (covering <= queued_after) early.fetch_add(1);
                released.fetch_add(1);
              },
              rng() % 100);
          std::uint32_t const op = rng() % 100;
          if (op == 0) queue.flush();
          if (op == 1) cleanup_guard guard = queue.defer_cleanup();
        }
      });
    }
    for (auto& w : workers)
      w.join();
    queue.check_invariants();
    EXPECT_LT(barriers_begun.load(), static_cast<int>(threads * per_thread / 6))
        << "retirement should make far fewer barriers than batches";
  }  // close: the rest
  EXPECT_EQ(released.load(), threads * per_thread);
  EXPECT_EQ(early.load(), 0u);
}

// Random enqueue / flush / defer / undefer with a barrier, against a model of the queue and its
// retired list.
TEST(retired_deallocations, model_based_stress) {
  std::mt19937 rng(20260612);
  std::size_t const max_count = 4;
  std::size_t const max_bytes = 64000;  // retired: 64 items, 4000 bytes
  int barriers = 0;
  std::size_t released = 0;
  pending_deallocations queue(max_count, max_bytes);  // after the counters: its end may release
  queue.set_release_barrier([&barriers] { ++barriers; });
  std::size_t const max_retired_count = queue.max_retired_count();
  std::size_t const max_retired_bytes = queue.max_retired_bytes();
  std::size_t count = 0, bytes = 0, retired = 0, retired_bytes = 0, model_released = 0;
  int model_barriers = 0;
  std::vector<cleanup_guard> guards;
  auto release_all = [&] {
    if (count + retired == 0) return;
    ++model_barriers;
    model_released += count + retired;
    count = bytes = retired = retired_bytes = 0;
  };
  for (int step = 0; step < 20000; ++step) {
    int const op = static_cast<int>(rng() % 10);
    if (op < 6) {
      std::size_t const b = rng() % 50 == 0 ? 20000 + rng() % 50000 : rng() % 300;
      queue.enqueue([&released] { ++released; }, b);
      ++count;
      bytes += b;
      if (guards.empty() && (count > max_count || bytes > max_bytes)) {
        retired += count;
        retired_bytes += bytes;
        count = bytes = 0;
        if (retired > max_retired_count || retired_bytes > max_retired_bytes) release_all();
      }
    } else if (op == 6) {
      std::size_t const ran = queue.flush();
      if (guards.empty()) {
        ASSERT_EQ(ran, count + retired) << "step " << step;
        release_all();
      } else {
        ASSERT_EQ(ran, 0u) << "step " << step;
      }
    } else if (op < 9 && guards.size() < 3) {
      guards.push_back(queue.defer_cleanup());
    } else if (!guards.empty()) {
      guards.pop_back();
      if (guards.empty() && (count > max_count || bytes > max_bytes)) release_all();
    }
    queue.check_invariants();
    ASSERT_EQ(queue.size(), count) << "step " << step;
    ASSERT_EQ(queue.bytes(), bytes) << "step " << step;
    ASSERT_EQ(queue.retired_size(), retired) << "step " << step;
    ASSERT_EQ(queue.retired_bytes(), retired_bytes) << "step " << step;
    ASSERT_EQ(released, model_released) << "step " << step;
    ASSERT_EQ(barriers, model_barriers) << "step " << step;
  }
  guards.clear();
}

}  // namespace
}  // namespace gpumem
