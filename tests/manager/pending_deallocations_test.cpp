// The deferred-deallocation queue: exact thresholds, deferral, error isolation, threads, and a
// seeded model-based stress test with check_invariants() after every step.
#include "log_capture.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

TEST(pending_deallocations, ten_items_wait_the_eleventh_flushes_all) {
  pending_deallocations queue(10, 1u << 30);
  int released = 0;
  for (int i = 0; i < 10; ++i)
    queue.enqueue([&released] { ++released; }, 1);
  EXPECT_EQ(released, 0);
  EXPECT_EQ(queue.size(), 10u);
  queue.enqueue([&released] { ++released; }, 1);
  EXPECT_EQ(released, 11);
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.bytes(), 0u);
  queue.check_invariants();
}

// block_free items (the managers' frees without a std::function) count, flush and run in queue
// order with the others; each keeps its state alive until it has run.
TEST(pending_deallocations, block_frees_run_in_order_and_keep_their_state_until_then) {
  struct record {
    std::vector<std::uintptr_t>* order;
  };
  std::vector<std::uintptr_t> order;
  auto state = std::make_shared<record>(record{&order});
  std::weak_ptr<record> watch = state;
  auto release = [](void* s, void* ptr, std::size_t bytes, void* stream) noexcept {
    EXPECT_EQ(bytes, 4u);
    EXPECT_EQ(stream, reinterpret_cast<void*>(7));
    static_cast<record*>(s)->order->push_back(reinterpret_cast<std::uintptr_t>(ptr));
  };
  pending_deallocations queue(2, 1u << 30);
  queue.enqueue(pending_deallocations::block_free{release, state, reinterpret_cast<void*>(1),
                                                  reinterpret_cast<void*>(7)},
                4);
  queue.enqueue([&order] { order.push_back(2); }, 4);
  queue.enqueue(
      pending_deallocations::block_free{release, std::move(state), reinterpret_cast<void*>(3),
                                        reinterpret_cast<void*>(7)},
      4);
  // The third item flushed all three; the state went with the last item that held it.
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(order, (std::vector<std::uintptr_t>{1, 2, 3}));
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.bytes(), 0u);
  queue.check_invariants();
  order.clear();
  auto kept = std::make_shared<record>(record{&order});
  queue.enqueue(pending_deallocations::block_free{release, kept, reinterpret_cast<void*>(5),
                                                  reinterpret_cast<void*>(7)},
                4);
  EXPECT_EQ(kept.use_count(), 2) << "queued: the item holds the state";
  EXPECT_EQ(queue.flush(), 1u);
  EXPECT_EQ(kept.use_count(), 1);
  EXPECT_EQ(order, std::vector<std::uintptr_t>{5});
  EXPECT_THROW(queue.enqueue(pending_deallocations::block_free{}, 1), logic_error);
}

TEST(pending_deallocations, bytes_equal_to_the_limit_wait_one_more_byte_flushes) {
  pending_deallocations queue(100, 1000);
  int released = 0;
  queue.enqueue([&released] { ++released; }, 600);
  queue.enqueue([&released] { ++released; }, 400);
  EXPECT_EQ(queue.bytes(), 1000u);
  EXPECT_EQ(released, 0);
  queue.enqueue([&released] { ++released; }, 1);
  EXPECT_EQ(released, 3);
  EXPECT_EQ(queue.bytes(), 0u);
}

// The byte limit from NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO: Numba's int(total * ratio), and no
// undefined conversion where total * ratio rounds to 2^64 (a device of SIZE_MAX bytes, ratio 1).
TEST(pending_deallocations, the_ratio_limit_is_exact_and_saturates_at_the_top) {
  EXPECT_EQ(pending_deallocations::max_bytes_for(1000, 0.2), 200u);
  EXPECT_EQ(pending_deallocations::max_bytes_for(std::size_t{4} << 30, 0.2),
            static_cast<std::size_t>(0.2 * static_cast<double>(std::size_t{4} << 30)));
  EXPECT_EQ(pending_deallocations::max_bytes_for(1000, 0.0), 0u);
  EXPECT_EQ(pending_deallocations::max_bytes_for(~std::size_t{0}, 1.0), ~std::size_t{0});
  EXPECT_EQ(pending_deallocations::max_bytes_for(~std::size_t{0} - 1000, 1.0), ~std::size_t{0});
  EXPECT_EQ(pending_deallocations::max_bytes_for(std::size_t{1} << 63, 1.0), std::size_t{1} << 63);
}

// Byte counts that would wrap the queue's sum saturate: the queue still flushes (over its byte
// limit) instead of seeing a small sum and holding everything.
TEST(pending_deallocations, queued_bytes_saturate_instead_of_wrapping) {
  pending_deallocations queue(100, ~std::size_t{0} - 1);
  int released = 0;
  queue.enqueue([&released] { ++released; }, ~std::size_t{0} - 1);
  EXPECT_EQ(released, 0) << "equal to the limit: no flush yet";
  queue.enqueue([&released] { ++released; }, 2);
  EXPECT_EQ(released, 2) << "the sum passed the limit; a wrapped sum (0) would not have flushed";
  EXPECT_EQ(queue.bytes(), 0u);
  queue.check_invariants();
}

TEST(pending_deallocations, nothing_is_released_while_deferred_and_guards_nest) {
  pending_deallocations queue(2, 1u << 30);
  int released = 0;
  {
    cleanup_guard outer = queue.defer_cleanup();
    {
      cleanup_guard inner = queue.defer_cleanup();
      for (int i = 0; i < 5; ++i)
        queue.enqueue([&released] { ++released; }, 1);
      EXPECT_EQ(queue.flush(), 0u);
    }
    EXPECT_TRUE(queue.is_deferred());
    EXPECT_EQ(released, 0);
    EXPECT_EQ(queue.size(), 5u);
    queue.check_invariants();
  }
  // The outermost guard ends over the count limit: it flushes.
  EXPECT_FALSE(queue.is_deferred());
  EXPECT_EQ(released, 5);
  queue.check_invariants();
}

TEST(pending_deallocations, outermost_guard_under_the_limits_does_not_flush) {
  pending_deallocations queue(10, 1u << 30);
  int released = 0;
  {
    cleanup_guard guard = queue.defer_cleanup();
    queue.enqueue([&released] { ++released; }, 1);
  }
  EXPECT_EQ(released, 0);
  EXPECT_EQ(queue.flush(), 1u);
  EXPECT_EQ(released, 1);
}

TEST(pending_deallocations, a_throw_inside_a_guard_ends_the_deferral) {
  pending_deallocations queue(1, 1u << 30);
  int released = 0;
  try {
    cleanup_guard guard = queue.defer_cleanup();
    queue.enqueue([&released] { ++released; }, 1);
    queue.enqueue([&released] { ++released; }, 1);
    EXPECT_EQ(released, 0);
    throw std::runtime_error("user code failed");
  } catch (std::runtime_error const&) {
  }
  EXPECT_FALSE(queue.is_deferred());
  EXPECT_EQ(released, 2);
}

TEST(pending_deallocations, moved_and_reset_guards_end_the_deferral_once) {
  pending_deallocations queue(10, 1u << 30);
  cleanup_guard a = queue.defer_cleanup();
  cleanup_guard b = std::move(a);
  EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(b.active());
  cleanup_guard c = queue.defer_cleanup();
  c.chain(std::move(b));
  c.reset();
  c.reset();
  EXPECT_FALSE(queue.is_deferred());
  queue.check_invariants();
}

TEST(pending_deallocations, a_guard_may_outlive_a_queue_owned_by_a_shared_pointer) {
  // A context's queues are shared-owned: a guard kept across gpumem::close() (Numba: cuda.close()
  // inside `with defer_cleanup():`) must not touch the destroyed queue (ASan checks it).
  auto queue = std::make_shared<pending_deallocations>(10, 1u << 30);
  std::weak_ptr<pending_deallocations> const watch = queue;
  cleanup_guard guard = queue->defer_cleanup();
  EXPECT_TRUE(queue->is_deferred());
  queue.reset();
  EXPECT_TRUE(watch.expired()) << "the guard must not keep the queue alive";
  guard.reset();  // ends nothing
  EXPECT_FALSE(guard.active());
  // While the queue lives, the guard ends its deferral as before.
  auto live = std::make_shared<pending_deallocations>(10, 1u << 30);
  {
    cleanup_guard inner = live->defer_cleanup();
    EXPECT_TRUE(live->is_deferred());
  }
  EXPECT_FALSE(live->is_deferred());
}

TEST(pending_deallocations, a_failing_release_is_logged_and_the_others_still_run) {
  test::error_log_capture capture;
  pending_deallocations queue(100, 1u << 30);
  std::vector<int> order;
  queue.enqueue([&order] { order.push_back(1); }, 10);
  queue.enqueue([] { throw std::runtime_error("free failed"); }, 20);
  queue.enqueue([&order] { order.push_back(3); }, 30);
  EXPECT_EQ(queue.flush(), 2u);
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
  std::vector<std::string> const errors = capture.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("free failed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("20 bytes"), std::string::npos) << errors[0];
  EXPECT_EQ(queue.size(), 0u);
}

TEST(pending_deallocations, after_close_enqueue_releases_at_once) {
  pending_deallocations queue(10, 1u << 30);
  int released = 0;
  {
    cleanup_guard guard = queue.defer_cleanup();
    queue.enqueue([&released] { ++released; }, 1);
    queue.close();  // regardless of the deferral
    EXPECT_EQ(released, 1);
  }
  queue.enqueue([&released] { ++released; }, 1);
  EXPECT_EQ(released, 2);
  EXPECT_TRUE(queue.is_closed());
  queue.check_invariants();
}

// Every release comes behind the barrier: flushes, the end of a deferral, close() and each release
// after it. (A batch that passes a limit by itself is retired instead: retired_deallocations_test.)
TEST(pending_deallocations, the_release_barrier_runs_once_before_each_batch) {
  pending_deallocations queue(2, 1u << 30);
  std::vector<std::string> order;
  queue.set_release_barrier([&order] { order.push_back("barrier"); });
  EXPECT_EQ(queue.flush(), 0u);
  EXPECT_TRUE(order.empty()) << "no barrier for an empty batch";
  for (int i = 0; i < 2; ++i)  // within the count limit
    queue.enqueue([&order, i] { order.push_back("free " + std::to_string(i)); }, 1);
  EXPECT_EQ(queue.flush(), 2u);
  EXPECT_EQ(order, (std::vector<std::string>{"barrier", "free 0", "free 1"}));
  order.clear();
  {
    cleanup_guard guard = queue.defer_cleanup();
    for (int i = 0; i < 4; ++i)
      queue.enqueue([&order] { order.push_back("free"); }, 1);
    EXPECT_TRUE(order.empty());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"barrier", "free", "free", "free", "free"}))
      << "the end of the deferral flushes one batch behind one barrier";
  order.clear();
  queue.enqueue([&order] { order.push_back("free"); }, 1);
  queue.close();
  queue.enqueue([&order] { order.push_back("late"); }, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"barrier", "free", "barrier", "late"}))
      << "close() and every release after it come behind the barrier too";
}

TEST(pending_deallocations, a_failing_barrier_is_logged_and_the_batch_still_released) {
  test::error_log_capture log;
  pending_deallocations queue(10, 1u << 30);
  queue.set_release_barrier([] { throw std::runtime_error("device lost"); });
  int released = 0;
  for (int i = 0; i < 3; ++i)
    queue.enqueue([&released] { ++released; }, 1);
  EXPECT_NO_THROW(EXPECT_EQ(queue.flush(), 3u));
  EXPECT_EQ(released, 3);
  ASSERT_EQ(log.errors().size(), 1u);
  EXPECT_NE(log.errors().front().find("device lost"), std::string::npos) << log.errors().front();
  queue.set_release_barrier({});  // removed: nothing runs before the next batch
  queue.enqueue([&released] { ++released; }, 1);
  EXPECT_EQ(queue.flush(), 1u);
  EXPECT_EQ(log.errors().size(), 1u);
}

TEST(pending_deallocations, releases_from_many_threads_all_run) {
  std::atomic<int> released{0};
  {
    pending_deallocations queue(10, 1u << 30);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) {
          queue.enqueue([&released] { released.fetch_add(1); }, 8);
          if (i % 97 == 0) {
            cleanup_guard guard = queue.defer_cleanup();
            queue.enqueue([&released] { released.fetch_add(1); }, 8);
          }
        }
      });
    }
    for (auto& t : threads)
      t.join();
    queue.check_invariants();
  }  // destruction runs what is left
  EXPECT_EQ(released.load(), 4 * (1000 + 11));
}

// Random enqueue / flush / defer / undefer against a model of the queue.
TEST(pending_deallocations, model_based_stress) {
  std::mt19937 rng(20240611);
  std::size_t const max_count = 7;
  std::size_t const max_bytes = 5000;
  std::size_t released = 0;  // before the queue: its destructor may run releases
  pending_deallocations queue(max_count, max_bytes);
  std::size_t model_count = 0;
  std::size_t model_bytes = 0;
  std::size_t model_released = 0;
  std::vector<cleanup_guard> guards;
  auto model_flush = [&] {
    model_released += model_count;
    model_count = 0;
    model_bytes = 0;
  };
  for (int step = 0; step < 20000; ++step) {
    int const op = static_cast<int>(rng() % 10);
    if (op < 6) {
      std::size_t const bytes = rng() % 1200;
      queue.enqueue([&released] { ++released; }, bytes);
      ++model_count;
      model_bytes += bytes;
      if (guards.empty() && (model_count > max_count || model_bytes > max_bytes)) model_flush();
    } else if (op == 6) {
      std::size_t const ran = queue.flush();
      if (guards.empty()) {
        EXPECT_EQ(ran, model_count);
        model_flush();
      } else {
        EXPECT_EQ(ran, 0u);
      }
    } else if (op < 9 && guards.size() < 4) {
      guards.push_back(queue.defer_cleanup());
    } else if (!guards.empty()) {
      guards.pop_back();
      if (guards.empty() && (model_count > max_count || model_bytes > max_bytes)) model_flush();
    }
    queue.check_invariants();
    ASSERT_EQ(queue.size(), model_count) << "step " << step;
    ASSERT_EQ(queue.bytes(), model_bytes) << "step " << step;
    ASSERT_EQ(released, model_released) << "step " << step;
    ASSERT_EQ(queue.is_deferred(), !guards.empty()) << "step " << step;
  }
  guards.clear();
}

TEST(pending_deallocations, a_guard_chained_into_itself_is_refused_and_still_ends_the_deferral) {
  pending_deallocations queue(10, 1u << 30);
  cleanup_guard a = queue.defer_cleanup();
  cleanup_guard b = queue.defer_cleanup();
  a.chain(std::move(b));
  EXPECT_THROW(a.chain(std::move(a)), logic_error);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(a.active());
  EXPECT_TRUE(queue.is_deferred());
  a.reset();
  EXPECT_FALSE(queue.is_deferred()) << "the deferral never ends";
  queue.check_invariants();
}

}  // namespace
}  // namespace gpumem
