// pool_resource at its edges: option values at their limits (a cached-size limit below the smallest
// class, a maximum off the 256-byte granularity), a live large block (or a pointer into its first
// granule) freed with a cached size, a
// growth in flight on another thread near the maximum, frees after close(), and second frees of
// cached sizes without track_blocks.
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "log_capture.hpp"
#include "pool_test_support.hpp"
#include "resource_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;

TEST_F(pool_test, a_large_block_freed_with_a_cached_size_is_caught_without_tracking) {
  // A cached size goes to the thread's stack: without the check, the live block would be handed
  // out again at once.
  pool_resource pool(upstream, {});
  std::vector<std::string> errors;
  auto previous = set_log_sink([&](log_level level, std::string_view message) {
    if (level == log_level::error) errors.emplace_back(message);
  });
  void* big = pool.allocate(8 * MiB, a);
  pool.deallocate(big, 256, a);
  void* small = pool.allocate(256, a);
  set_log_sink(previous);
  EXPECT_FALSE(test::overlap(small, 256, big, 8 * MiB)) << "a live block handed out again";
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("allocated with another size"), std::string::npos) << errors[0];
  EXPECT_EQ(pool.statistics().invalid_deallocations, 1u);
  pool.check_invariants();
  pool.deallocate(small, 256, a);
  pool.deallocate(big, 8 * MiB, a);
  void* again = pool.allocate(8 * MiB, a);
  pool.deallocate(again, 8 * MiB, a);
  {
    test::error_log_capture log;
    pool.deallocate(again, 8 * MiB, a);  // a second free of a large block: counted too
    EXPECT_EQ(log.errors().size(), 1u);
  }
  EXPECT_EQ(pool.statistics().invalid_deallocations, 2u);
  pool.check_invariants();
}

TEST_F(pool_test, a_pointer_into_a_large_block_freed_with_a_cached_size_is_caught) {
  // An offset into a live buffer freed by mistake: within the block's first granule (the large
  // block map's entry for it holds the block), it is refused and the block stays whole.
  pool_resource pool(upstream, {});
  auto* const big = static_cast<char*>(pool.allocate(MiB, a));
  for (std::size_t const offset : {std::size_t{256}, std::size_t{4096}, std::size_t{64} * KiB}) {
    test::error_log_capture log;
    pool.deallocate(big + offset, 512, a);
    ASSERT_EQ(log.errors().size(), 1u) << offset;
    EXPECT_NE(log.errors()[0].find("inside a live block"), std::string::npos) << log.errors()[0];
  }
  EXPECT_EQ(pool.statistics().invalid_deallocations, 3u);
  std::vector<void*> small;
  for (int i = 0; i < 8; ++i) {
    small.push_back(pool.allocate(512, a));
    EXPECT_FALSE(test::overlap(small.back(), 512, big, MiB)) << "a live block handed out again";
  }
  pool.check_invariants();
  for (void* p : small)
    pool.deallocate(p, 512, a);
  pool.deallocate(big, MiB, a);
  EXPECT_EQ(pool.statistics().invalid_deallocations, 3u);
  pool.check_invariants();
}

TEST_F(pool_test, a_cached_size_limit_below_the_smallest_class_caches_nothing) {
  for (std::size_t limit : {std::size_t{1}, std::size_t{100}, std::size_t{255}}) {
    pool_options options;
    options.max_cached_size = limit;
    pool_resource pool(upstream, options);
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (std::size_t bytes : {1, 100, 255, 256, 257, 4096})
      blocks.emplace_back(pool.allocate(bytes, a), bytes);
    for (std::size_t i = 0; i < blocks.size(); ++i)
      for (std::size_t j = i + 1; j < blocks.size(); ++j)
        EXPECT_FALSE(
            test::overlap(blocks[i].first, blocks[i].second, blocks[j].first, blocks[j].second))
            << limit;
    EXPECT_EQ(pool.statistics().cached_bytes, 0u) << limit;
    for (auto const& [p, bytes] : blocks)
      pool.deallocate(p, bytes, a);
    pool.check_invariants();
  }
}

TEST_F(pool_test, a_maximum_size_off_the_granularity_is_held_to_it) {
  // 1000 bytes: the pool holds at most 768 (three blocks of 256), and its structure stays exact.
  pool_options options;
  options.maximum_size = 1000;
  options.initial_size = 1000;
  pool_resource pool(upstream, options);
  EXPECT_EQ(pool.statistics().held_bytes, 768u);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i)
    blocks.push_back(pool.allocate(200, a));
  EXPECT_THROW(pool.allocate(200, a), out_of_memory);
  pool.check_invariants();
  for (void* p : blocks)
    pool.deallocate(p, 200, a);
  pool.check_invariants();
}

// An upstream whose allocations wait while it is held back; `entered` counts the calls.
class held_back_upstream final : public memory_resource {
 public:
  explicit held_back_upstream(memory_resource& inner) : inner_(inner) {}
  std::string name() const override { return "held_back_upstream"; }
  void hold_back() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_back_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_back_ = false;
    }
    changed_.notify_all();
  }
  void wait_until_entered(int calls) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_ >= calls; });
  }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++entered_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !held_back_; });
    }
    return inner_.allocate(bytes, s);
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle s) noexcept override {
    inner_.deallocate(p, bytes, s);
  }
  memory_resource& inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_back_ = false;
  int entered_ = 0;
};

TEST_F(pool_test, a_growth_in_flight_near_the_maximum_is_waited_for_not_taken_for_memory_held) {
  // The pool holds 24 MiB, all live; a's 4 MiB miss grows it by the 14 MiB left under the maximum
  // (its growth step is larger), and that growth is held back in the upstream. b's 4 MiB miss
  // cannot grow beside it, but fits in what it brings: b must wait for it, not run out.
  held_back_upstream slow(upstream);
  pool_options options;
  options.max_cached_size = 0;
  options.maximum_size = 38 * MiB;
  pool_resource pool(slow, options);
  void* first = pool.allocate(24 * MiB, a);
  slow.hold_back();
  void* on_a = nullptr;
  void* on_b = nullptr;
  std::string a_error, b_error;
  std::thread grower([&] {
    try {
      on_a = pool.allocate(4 * MiB, a);
    } catch (std::exception const& e) {
      a_error = e.what();
    }
  });
  slow.wait_until_entered(2);
  std::thread other([&] {
    try {
      on_b = pool.allocate(4 * MiB, b);
    } catch (std::exception const& e) {
      b_error = e.what();
    }
  });
  // b reaches its last resort meanwhile (the outcome must not depend on it).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  slow.release();
  grower.join();
  other.join();
  EXPECT_EQ(a_error, "");
  EXPECT_EQ(b_error, "") << "b ran out while a's growth was in flight";
  ASSERT_NE(on_a, nullptr);
  ASSERT_NE(on_b, nullptr);
  EXPECT_FALSE(test::overlap(on_a, 4 * MiB, on_b, 4 * MiB));
  EXPECT_EQ(pool.statistics().held_bytes, 38 * MiB);
  pool.deallocate(on_a, 4 * MiB, a);
  pool.deallocate(on_b, 4 * MiB, b);
  pool.deallocate(first, 24 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, frees_after_close_are_counted_in_the_statistics) {
  // After close() the pool takes no block back (its chunks go at destruction), but a free still
  // ends the block's life in the statistics.
  pool_resource pool(upstream, {});
  void* small = pool.allocate(1000, a);
  void* large = pool.allocate(8 * MiB, a);
  pool.close(pool_live_chunks::give_back_at_destruction);
  pool.deallocate(small, 1000, a);
  pool.deallocate(large, 8 * MiB, a);
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.allocations, 2u);
  EXPECT_EQ(st.deallocations, 2u);
}

// After close(), frees are still checked: a double free or a foreign pointer must neither make
// more deallocations than allocations nor take a block still live out of the statistics.
TEST_F(pool_test, frees_after_close_are_checked_with_track_blocks) {
  pool_options options;
  options.track_blocks = true;
  pool_resource pool(upstream, options);
  void* first = pool.allocate(1000, a);
  void* second = pool.allocate(1000, a);
  std::size_t const one = pool.statistics().live_bytes / 2;
  pool.close(pool_live_chunks::give_back_at_destruction);
  test::error_log_capture errors;
  pool.deallocate(first, 1000, nullptr);
  pool.deallocate(first, 1000, nullptr);  // double free
  int foreign = 0;
  pool.deallocate(&foreign, 1000, nullptr);
  pool.deallocate(second, 5000, nullptr);  // wrong size (another size class)
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.invalid_deallocations, 3u);
  EXPECT_EQ(errors.errors().size(), 3u);
  EXPECT_EQ(st.live_bytes, one) << "the second block is still live";
  EXPECT_EQ(st.requested_bytes, 1000u);
  EXPECT_EQ(st.deallocations, 1u);
  pool.deallocate(second, 1000, nullptr);
  st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.deallocations, st.allocations);
}

TEST_F(pool_test, frees_after_close_never_exceed_what_was_live_at_close) {
  pool_resource pool(upstream, {});
  void* small = pool.allocate(1000, a);
  void* large = pool.allocate(8 * MiB, a);
  pool.deallocate(pool.allocate(1000, a), 1000, a);
  pool.close(pool_live_chunks::give_back_at_destruction);
  test::error_log_capture errors;
  pool.deallocate(large, 8 * MiB, nullptr);
  pool.deallocate(large, 8 * MiB, nullptr);  // more bytes than were live: caught
  pool.deallocate(small, 1000, nullptr);
  int foreign = 0;
  pool.deallocate(&foreign, 64, nullptr);  // more blocks than were live: caught
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.invalid_deallocations, 2u);
  EXPECT_EQ(errors.errors().size(), 2u);
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.requested_bytes, 0u);
  EXPECT_EQ(st.allocations, 3u);
  EXPECT_EQ(st.deallocations, 3u);
}

// Without track_blocks, a second free of a cached size on the same thread is refused while the
// block is among the last few on that thread's stack: otherwise it would be handed out twice.
TEST_F(pool_test, a_second_free_soon_after_the_first_is_refused_without_tracking) {
  pool_resource pool(upstream, {});
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i)
    blocks.push_back(pool.allocate(1000, a));
  test::error_log_capture errors;
  pool.deallocate(blocks[0], 1000, a);
  pool.deallocate(blocks[0], 1000, a);  // at once
  pool.deallocate(blocks[1], 1000, a);
  pool.deallocate(blocks[2], 1000, a);
  pool.deallocate(blocks[3], 1000, a);
  pool.deallocate(blocks[1], 1000, a);  // two frees later
  pool.deallocate(blocks[0], 1000, a);  // three frees later
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.invalid_deallocations, 3u);
  ASSERT_EQ(errors.errors().size(), 3u);
  EXPECT_NE(errors.errors()[0].find("double free"), std::string::npos) << errors.errors()[0];
  EXPECT_EQ(st.live_bytes, 1024u) << "blocks[4] alone is live (a 1 KiB block)";
  EXPECT_EQ(st.requested_bytes, 1000u);
  EXPECT_EQ(st.deallocations, 4u);
  std::vector<void*> again;
  for (int i = 0; i < 4; ++i)
    again.push_back(pool.allocate(1000, a));
  again.push_back(blocks[4]);
  std::sort(again.begin(), again.end());
  EXPECT_EQ(std::adjacent_find(again.begin(), again.end()), again.end())
      << "a block handed out twice";
  for (void* p : again)
    pool.deallocate(p, 1000, a);
  st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.deallocations, st.allocations);
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
