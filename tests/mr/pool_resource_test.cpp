// Focused tests of pool_resource: size classes, same-stream reuse, cross-stream ordering, batched
// fences (no event per free), reclaiming other streams' blocks, growth, trim, out-of-memory and bad
// frees. Threads and thread caches: pool_threads_test.cpp.
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/detail/pool_size_classes.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "log_capture.hpp"
#include "pool_test_support.hpp"
#include "resource_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

using detail::pool_class_size;
using test::pool_test;
using stream_gate = test::closed_gate;
using detail::pool_size_class;

TEST(pool_size_classes, round_up_within_one_eighth_and_round_trip) {
  for (std::size_t bytes = 1; bytes <= 64 * MiB; bytes = bytes * 17 / 16 + 1) {
    unsigned const c = pool_size_class(bytes);
    std::size_t const size = pool_class_size(c);
    ASSERT_GE(size, bytes) << bytes;
    ASSERT_EQ(size % 256, 0u) << bytes;
    if (bytes >= 2 * KiB) {
      ASSERT_LE(size, bytes + bytes / 8) << bytes;
    }
    ASSERT_EQ(pool_size_class(size), c) << bytes;
    if (c > 0) {
      ASSERT_LT(pool_class_size(c - 1), bytes) << bytes;
    }
  }
  EXPECT_EQ(pool_size_class(4 * MiB), 95u);
  EXPECT_EQ(pool_class_size(95), 4 * MiB);
}

TEST_F(pool_test, distinct_aligned_blocks_and_zero_bytes) {
  pool_resource pool(upstream, {});
  EXPECT_EQ(pool.allocate(0, a), nullptr);
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::set<std::uintptr_t> seen;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::size_t const bytes = (std::size_t{1} << (rng() % 24)) + rng() % 100;
    void* p = pool.allocate(bytes, a);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % default_alignment, 0u);
    ASSERT_TRUE(seen.insert(reinterpret_cast<std::uintptr_t>(p)).second);
    blocks.emplace_back(p, bytes);
  }
  pool.check_invariants();
  EXPECT_GT(pool.statistics().live_bytes, 0u);
  for (auto& [p, bytes] : blocks)
    pool.deallocate(p, bytes, a);
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().live_bytes, 0u);
  EXPECT_EQ(pool.statistics().allocations, 300u);
  EXPECT_EQ(pool.statistics().deallocations, 300u);
}

TEST_F(pool_test, freed_block_is_reused_at_once_on_its_stream) {
  // A pool per size: in a shared one, the 16 MiB block freed on `a` merges with what the smaller
  // sizes' slab left in a's arena, and the best fit then starts below it.
  for (std::size_t bytes : {std::size_t{1000}, 200 * KiB, 16 * MiB}) {
    pool_resource pool(upstream, {});
    void* p = pool.allocate(bytes, a);
    stream_gate gate(a);  // the stream is busy: reuse on the same stream must not wait for it
    pool.deallocate(p, bytes, a);
    EXPECT_EQ(pool.allocate(bytes, a), p) << bytes;
    pool.deallocate(p, bytes, a);
    gate.open();
    EXPECT_EQ(pool.statistics().events_recorded, 0u);
    EXPECT_EQ(pool.statistics().synchronizations, 0u);
    pool.check_invariants();
  }
}

TEST_F(pool_test, block_freed_on_a_busy_stream_is_not_given_to_another) {
  pool_options options;
  options.max_cached_size = 0;  // every size goes through the shared best fit
  pool_resource pool(upstream, options);
  void* p = pool.allocate(1 * MiB, a);
  stream_gate gate(a);
  pool.deallocate(p, 1 * MiB, a);
  void* q = pool.allocate(1 * MiB, b);
  EXPECT_NE(q, p);
  EXPECT_FALSE(test::overlap(q, 1 * MiB, p, 1 * MiB)) << "overlapping the pending block";
  pool.check_invariants();
  gate.open();
  pool.deallocate(q, 1 * MiB, b);
  backend().synchronize();
  pool.check_invariants();
}

TEST_F(pool_test, cross_stream_reuse_after_completion_costs_one_event_for_a_batch) {
  pool_options options;
  options.max_cached_size = 0;
  options.chunk_size = 4 * MiB;
  options.maximum_size = 4 * MiB;
  pool_resource pool(upstream, options);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i)
    blocks.push_back(pool.allocate(256 * KiB, a));
  {
    stream_gate gate(a);
    for (void* p : blocks)
      pool.deallocate(p, 256 * KiB, a);
    EXPECT_EQ(pool.statistics().stream_bytes, 4 * MiB);
    gate.open();
  }
  // Stream b needs the memory: ONE event (or an idle-stream check) covers all 16 frees.
  void* whole = pool.allocate(4 * MiB, b);
  EXPECT_EQ(whole, blocks.front());
  pool_statistics const st = pool.statistics();
  EXPECT_LE(st.events_recorded, 1u);
  EXPECT_EQ(st.deallocations, 16u);
  pool.deallocate(whole, 4 * MiB, b);
  pool.check_invariants();
}

TEST_F(pool_test, churn_on_two_streams_records_far_fewer_events_than_frees) {
  pool_options options;
  options.fence_bytes = 4 * MiB;
  pool_resource pool(upstream, options);
  std::mt19937_64 rng(11);
  std::vector<std::tuple<void*, std::size_t, stream_handle>> live;
  for (int i = 0; i < 20000; ++i) {
    if (live.size() < 200 && (live.empty() || rng() % 2)) {
      std::size_t const bytes = 256 + rng() % (512 * KiB);
      stream_handle s = rng() % 2 ? a : b;
      live.emplace_back(pool.allocate(bytes, s), bytes, s);
    } else {
      std::size_t const k = rng() % live.size();
      auto [p, bytes, s] = live[k];
      pool.deallocate(p, bytes, rng() % 3 == 0 ? (s == a ? b : a) : s);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto [p, bytes, s] : live)
    pool.deallocate(p, bytes, s);
  pool_statistics const st = pool.statistics();
  EXPECT_GT(st.deallocations, 9000u);
  EXPECT_LT(st.events_recorded * 50, st.deallocations)
      << st.events_recorded << " events for " << st.deallocations << " frees";
  pool.check_invariants();
}

TEST_F(pool_test, large_blocks_coalesce_back_into_one_extent) {
  pool_options options;
  options.initial_size = 64 * MiB;  // one chunk
  pool_resource pool(upstream, options);
  std::vector<void*> blocks;
  std::string growth;  // how the pool grew, for the message if the chunk count is wrong
  for (int i = 0; i < 6; ++i) {
    blocks.push_back(pool.allocate(8 * MiB + 3, nullptr));
    pool_statistics const s = pool.statistics();
    growth += " [" + std::to_string(i) + ": held " + std::to_string(s.held_bytes) + " in " +
              std::to_string(s.chunks) + " chunk(s), live " + std::to_string(s.live_bytes) + "]";
  }
  for (int i : {1, 3, 5, 0, 2, 4})
    pool.deallocate(blocks[i], 8 * MiB + 3, nullptr);
  backend().synchronize_stream(nullptr);
  // All six merged back into the whole chunk.
  EXPECT_EQ(pool.trim(), 64 * MiB) << "growth:" << growth;
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  pool.check_invariants();
}

TEST_F(pool_test, out_of_memory_reports_request_held_largest_block_and_fragmentation) {
  pool_options options;
  options.chunk_size = 2 * MiB;
  options.maximum_size = 2 * MiB;
  options.max_cached_size = 0;
  pool_resource pool(upstream, options);
  void* x = pool.allocate(512 * KiB, nullptr);
  void* y = pool.allocate(512 * KiB, nullptr);
  pool.deallocate(x, 512 * KiB, nullptr);
  try {
    pool.allocate(1536 * KiB, nullptr);
    FAIL() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_EQ(e.requested_bytes(), 1536 * KiB);
    EXPECT_EQ(e.current_bytes(), 2 * MiB);
    EXPECT_NE(what.find("largest free block 1.00 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("fragmentation"), std::string::npos) << what;
    EXPECT_NE(what.find("pool_resource"), std::string::npos) << what;
  }
  pool.deallocate(y, 512 * KiB, nullptr);
  EXPECT_NE(pool.allocate(2 * MiB, nullptr), nullptr);  // after the frees, the whole chunk fits
  pool.check_invariants();
}

TEST_F(pool_test, out_of_memory_from_a_small_device_is_typed) {
  auto small = make_host_backend({4 * MiB, 256});
  cuda_resource device(small.get());
  pool_options options;
  options.backend = small.get();
  options.chunk_size = 2 * MiB;
  pool_resource pool(device, options);
  void* p = pool.allocate(3 * MiB, nullptr);
  EXPECT_THROW(pool.allocate(2 * MiB, nullptr), out_of_memory);
  pool.deallocate(p, 3 * MiB, nullptr);
  EXPECT_NO_THROW(pool.deallocate(pool.allocate(3 * MiB, nullptr), 3 * MiB, nullptr));
  pool.check_invariants();
}

TEST_F(pool_test, tracking_catches_double_free_and_wrong_size) {
  pool_options options;
  options.track_blocks = true;
  pool_resource pool(upstream, options);
  std::vector<std::string> errors;
  auto previous = set_log_sink([&](log_level level, std::string_view message) {
    if (level == log_level::error) errors.emplace_back(message);
  });
  void* p = pool.allocate(1000, a);
  void* q = pool.allocate(10 * MiB, a);
  pool.deallocate(p, 1000, a);
  pool.deallocate(p, 1000, a);      // double free
  pool.deallocate(q, 20 * MiB, a);  // wrong size
  set_log_sink(previous);
  EXPECT_EQ(pool.statistics().invalid_deallocations, 2u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("not allocated"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("allocated with 10485760 bytes"), std::string::npos) << errors[1];
  pool.check_invariants();
  pool.deallocate(q, 10 * MiB, a);
  pool.check_invariants();
}

// track_blocks keeps the size each block was asked for, and a free must give that size: a wrong
// size that rounds to the same block (the same size class, the same 256 bytes of a large block)
// is caught as well, not only one that would free another amount of memory. Each is named with
// the pointer, the size given and the size allocated, and ignored: the block stays live.
TEST_F(pool_test, tracking_catches_a_wrong_size_that_rounds_to_the_same_block) {
  pool_options options;
  options.track_blocks = true;
  pool_resource pool(upstream, options);
  ASSERT_EQ(pool_size_class(1000), pool_size_class(1001)) << "the case under test";
  void* small = pool.allocate(1000, a);
  void* large = pool.allocate(10 * MiB + 1000, a);  // rounded to 10 MiB + 1024
  std::vector<std::string> errors;
  {
    test::error_log_capture log;
    pool.deallocate(small, 1001, a);
    pool.deallocate(large, 10 * MiB + 1001, a);
    errors = log.errors();
  }
  EXPECT_EQ(pool.statistics().invalid_deallocations, 2u);
  EXPECT_EQ(pool.statistics().requested_bytes, 10 * MiB + 2000) << "both blocks are still live";
  ASSERT_EQ(errors.size(), 2u);
  auto const expect_names = [](std::string const& error, void* p, std::size_t given,
                               std::size_t allocated) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
    EXPECT_NE(error.find(std::string(hex) + ", " + std::to_string(given) + ")"), std::string::npos)
        << error;
    EXPECT_NE(error.find("allocated with " + std::to_string(allocated) + " bytes"),
              std::string::npos)
        << error;
  };
  expect_names(errors[0], small, 1001, 1000);
  expect_names(errors[1], large, 10 * MiB + 1001, 10 * MiB + 1000);
  pool.check_invariants();
  pool.deallocate(small, 1000, a);
  pool.deallocate(large, 10 * MiB + 1000, a);
  EXPECT_EQ(pool.statistics().invalid_deallocations, 2u);
  EXPECT_EQ(pool.statistics().requested_bytes, 0u);
  pool.check_invariants();
}

TEST_F(pool_test, initial_size_and_maximum_are_respected) {
  pool_options options;
  options.initial_size = 8 * MiB;
  options.maximum_size = 8 * MiB;
  pool_resource pool(upstream, options);
  EXPECT_EQ(pool.statistics().held_bytes, 8 * MiB);
  EXPECT_EQ(pool.statistics().upstream_allocations, 1u);
  void* p = pool.allocate(8 * MiB, nullptr);
  EXPECT_THROW(pool.allocate(1 * KiB, nullptr), out_of_memory);
  pool.deallocate(p, 8 * MiB, nullptr);
  EXPECT_THROW(pool_resource(upstream, pool_options{16 * MiB, 32 * MiB, 8 * MiB}), logic_error);
  for (std::size_t chunk : {std::size_t{0}, ~std::size_t{0}, ~std::size_t{0} / 2 + 1}) {
    pool_options bad;
    bad.chunk_size = chunk;  // growth steps computed from it must not wrap
    EXPECT_THROW(pool_resource(upstream, bad), logic_error) << chunk;
  }
}

TEST_F(pool_test, growth_gives_back_chunks_too_small_for_the_request_first) {
  for (bool trim_first : {true, false}) {
    pool_options options;
    options.max_cached_size = 0;
    options.chunk_size = 4 * MiB;
    options.trim_before_growth = trim_first;
    pool_resource pool(upstream, options);
    void* p = pool.allocate(4 * MiB, a);
    pool.deallocate(p, 4 * MiB, a);  // the whole first chunk, owned by a
    // The first growth finds that chunk free and keeps it (a loop's next round often takes it
    // again); found free by the next growth too, it goes back before that growth.
    void* q = pool.allocate(8 * MiB, a);
    EXPECT_EQ(pool.statistics().held_bytes, 12 * MiB);
    EXPECT_EQ(pool.statistics().upstream_deallocations, 0u);
    void* r = pool.allocate(16 * MiB, a);
    pool_statistics const st = pool.statistics();
    EXPECT_EQ(st.held_bytes, trim_first ? 24 * MiB : 28 * MiB) << trim_first;
    EXPECT_EQ(st.upstream_deallocations, trim_first ? 1u : 0u) << trim_first;
    EXPECT_EQ(st.peak_held_bytes, trim_first ? 24 * MiB : 28 * MiB) << trim_first;
    pool.check_invariants();
    pool.deallocate(q, 8 * MiB, a);
    pool.deallocate(r, 16 * MiB, a);
    pool.release_stream(a);
    pool.check_invariants();
  }
}

TEST_F(pool_test, blocks_parked_in_class_lists_need_no_fence_and_stay_private) {
  pool_options options;
  options.fence_bytes = 1 * MiB;
  pool_resource pool(upstream, options);
  pool.deallocate(pool.allocate(64 * KiB, b), 64 * KiB, b);  // two streams: fences are on
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i)
    blocks.push_back(pool.allocate(64 * KiB, a));
  stream_gate gate(a);
  // Stream-owned bytes so far: what the carves left of the slabs they took for a and b.
  std::size_t const owned = pool.statistics().stream_bytes;
  for (void* p : blocks)
    pool.deallocate(p, 64 * KiB, a);
  pool_statistics const st = pool.statistics();
  // Overflows park 4 MiB on a's class lists, well past fence_bytes: no other stream may take them
  // before they are drained into extents, so no event is recorded for them.
  EXPECT_EQ(st.events_recorded, 0u);
  EXPECT_EQ(st.stream_bytes, owned);
  EXPECT_EQ(st.cached_bytes, 64 * 64 * KiB + 64 * KiB);
  // Stream b runs short: it must not get a block whose free on `a` is still pending.
  void* q = pool.allocate(4 * MiB, b);
  for (void* p : blocks)
    EXPECT_FALSE(test::overlap(q, 4 * MiB, p, 64 * KiB)) << "overlapping a pending block";
  pool.check_invariants();
  gate.open();
  pool.deallocate(q, 4 * MiB, b);
  backend().synchronize();
  pool.check_invariants();
}

TEST_F(pool_test, a_pool_too_tight_for_its_sizes_grows_instead_of_merging_on_every_miss) {
  // Sizes log-uniform over 1 KiB-4 MiB with few blocks live: without a bound on the misses that
  // merge every list back, nearly every third pair took the mutex to merge and re-carve.
  pool_options options;
  options.max_cached_size = 4 * MiB;  // every size a cached one: misses merge class lists
  pool_resource pool(upstream, options);
  test::random_pairs pairs(pool, a, 5, {1 * KiB, 4 * MiB, 64});
  auto run = [&](std::size_t allocations) {
    for (std::size_t const end = pairs.allocations() + allocations; pairs.allocations() < end;)
      pairs.step();
  };
  run(20000);  // warm up
  std::uint64_t const before = pool.statistics().lock_acquisitions;
  run(20000);
  std::uint64_t const locks = pool.statistics().lock_acquisitions - before;
  EXPECT_LT(locks, 20000u / 20) << locks << " lock acquisitions for 20000 pairs";
  pairs.free_all();
  pool.check_invariants();
}

TEST_F(pool_test, blocks_parked_by_another_stream_are_reclaimed_before_out_of_memory) {
  pool_options options;
  options.initial_size = 8 * MiB;  // one chunk, all the pool may hold
  options.maximum_size = 8 * MiB;
  options.max_cached_size = 1 * MiB;  // the blocks below are cached sizes, parked when freed
  pool_resource pool(upstream, options);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i)
    blocks.push_back(pool.allocate(1 * MiB, b));
  for (void* p : blocks)
    pool.deallocate(p, 1 * MiB, b);  // parked in this thread's cache and b's class lists
  backend().synchronize_stream(b);
  // The pool is at its maximum: stream a gets the whole chunk only by taking b's parked blocks.
  void* whole = pool.allocate(8 * MiB, a);
  EXPECT_NE(whole, nullptr);
  pool_statistics const st = pool.statistics();
  EXPECT_GE(st.reclaims, 1u);
  EXPECT_EQ(st.upstream_allocations, 1u);
  pool.deallocate(whole, 8 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, name_names_the_upstream) {
  pool_resource pool(upstream, {});
  EXPECT_EQ(pool.name(), "pool_resource over cuda_resource");
}

}  // namespace
}  // namespace gpumem
