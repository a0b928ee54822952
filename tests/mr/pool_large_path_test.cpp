// pool_resource's large path (blocks above max_cached_size): warm pairs on their own streams take
// neither the pool's mutex nor an event per free, chunks left unused go back before a growth even
// when split between the free extents and a stream's, best fit and coalescing keep a
// shape-changing workload within its chunks, a stream short of memory takes another's free
// memory with a wait on the device instead of growing, and a small workload on several streams
// holds a few MiB, not a chunk per stream.
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;
using test::random_pairs;

// Large blocks: sizes 5-40 MiB, at most 12 live.
constexpr random_pairs::sizes large_blocks{5 * MiB, 40 * MiB, 12};

TEST_F(pool_test, warm_large_pairs_on_two_streams_take_no_mutex_and_no_event_per_free) {
  // One thread drives both streams, so the counts are exact. Once each stream's extents hold what
  // it uses, a large block is carved from and handed back to its stream's extents under that
  // stream's lock alone, and a stream that takes back what it frees needs no fence.
  pool_resource pool(upstream);
  {
    random_pairs on_a(pool, a, 11, large_blocks);
    random_pairs on_b(pool, b, 12, large_blocks);
    test::step_in_turn(on_a, on_b, 4000);  // warm up
    pool_statistics const before = pool.statistics();
    std::size_t const frees_before = on_a.frees() + on_b.frees();
    test::step_in_turn(on_a, on_b, 4000);
    pool_statistics const after = pool.statistics();
    std::size_t const frees = on_a.frees() + on_b.frees() - frees_before;
    std::uint64_t const locks = after.lock_acquisitions - before.lock_acquisitions;
    std::uint64_t const events = after.events_recorded - before.events_recorded;
    ASSERT_GT(frees, 3000u);
    EXPECT_LT(locks, frees / 50) << locks << " mutex acquisitions for " << frees << " frees";
    EXPECT_LT(events, frees / 50) << events << " events for " << frees << " large frees";
    pool.check_invariants();
  }
  pool.check_invariants();
}

TEST_F(pool_test, the_large_paths_mutex_time_and_the_device_queries_are_counted) {
  // The statistics that say what limits scaling: a large block that misses its stream's extents
  // takes the mutex (its wait and hold are timed), and memory another stream freed is handed over
  // after asking the device whether that stream has passed the free (a stream the caller may ask
  // about: its per-thread default stream).
  pool_options options;
  options.max_cached_size = 0;  // every block on the large path
  options.chunk_size = 4 * MiB;
  options.maximum_size = 4 * MiB;
  pool_resource pool(upstream, options);
  stream_handle const own = backend().per_thread_default_stream();
  pool_statistics const start = pool.statistics();
  EXPECT_EQ(start.large_lock_hold_ns, 0u);
  EXPECT_EQ(start.device_queries, 0u);
  void* const on_a = pool.allocate(4 * MiB, own);  // grows: the large path under the mutex
  pool.deallocate(on_a, 4 * MiB, own);             // its own until it passes the free
  void* const on_b = pool.allocate(4 * MiB, b);    // the whole pool: b must ask about it
  EXPECT_EQ(on_b, on_a);
  pool_statistics const after = pool.statistics();
  EXPECT_GT(after.lock_acquisitions, start.lock_acquisitions);
  EXPECT_GT(after.large_lock_hold_ns, 0u);
  EXPECT_GT(after.device_queries, 0u);
  EXPECT_GE(after.device_queries, after.events_completed) << "each completion was asked";
  pool.deallocate(on_b, 4 * MiB, b);
  pool.check_invariants();
}

TEST_F(pool_test, a_miss_takes_another_streams_free_memory_and_waits_for_that_stream) {
  // a's work on its block is still queued behind a closed gate when a frees it, and the free
  // records a fence (fence_bytes is small). b, short of memory, takes that block instead of
  // growing, and is made to wait for that fence on the device: b's copy of the block sees a's
  // fill, though it was queued before the gate opened. Without the wait (wait_across_streams off,
  // the default), b grows and gets another block.
  for (bool const wait : {true, false}) {
    pool_options options;
    options.max_cached_size = 0;  // every block on the large path
    options.wait_across_streams = wait;
    options.fence_bytes = 1 * MiB;
    pool_resource pool(upstream, options);
    std::size_t const bytes = 8 * MiB;
    pool.deallocate(pool.allocate(1 * KiB, b), 1 * KiB, b);  // the pool knows two streams
    void* const on_a = pool.allocate(bytes, a);
    auto* const seen_by_b = static_cast<std::uint8_t*>(backend().allocate_pinned(256, {}));
    {
      test::closed_gate gate(a);
      backend().fill_async(on_a, 0xab, bytes, a);  // runs once the gate opens
      pool.deallocate(on_a, bytes, a);
      pool_statistics const before = pool.statistics();
      void* const on_b = pool.allocate(bytes, b);
      pool_statistics const after = pool.statistics();
      EXPECT_EQ(after.stream_waits - before.stream_waits, wait ? 1u : 0u);
      EXPECT_EQ(after.upstream_allocations - before.upstream_allocations, wait ? 0u : 1u);
      EXPECT_EQ(on_b == on_a, wait);
      backend().copy_async(seen_by_b, on_b, 256, b);
      gate.open();
      backend().synchronize_stream(b);
      if (wait) {
        for (int i = 0; i < 256; ++i)
          ASSERT_EQ(seen_by_b[i], 0xab) << "b used the block before a's work on it had run";
      }
      pool.deallocate(on_b, bytes, b);
    }
    backend().deallocate_pinned(seen_by_b);
    backend().synchronize();
    pool.check_invariants();
  }
}

TEST_F(pool_test, a_small_workload_on_several_streams_holds_a_few_mib) {
  // Growth starts at 2 MiB and grows by half of what the pool holds: four streams that each use
  // about 1 MiB hold a few MiB, not the 32 MiB chunk_size each; an expandable pool maps its range
  // by the same steps, in whole pages (4 MiB).
  for (bool expandable : {false, true}) {
    pool_options options;
    options.expandable = expandable;
    pool_resource pool(upstream, options);
    std::vector<stream_handle> streams{a, b, backend().create_stream(true),
                                       backend().create_stream(true)};
    for (int round = 0; round < 3; ++round)
      for (stream_handle s : streams) {
        void* p = pool.allocate(700 * KiB, s);
        void* q = pool.allocate(300 * KiB, s);
        pool.deallocate(p, 700 * KiB, s);
        pool.deallocate(q, 300 * KiB, s);
      }
    pool_statistics const st = pool.statistics();
    EXPECT_LE(st.peak_held_bytes, expandable ? 24 * MiB : 16 * MiB)
        << st.peak_held_bytes << " " << expandable;
    EXPECT_LT(st.peak_held_bytes, pool.options().chunk_size) << expandable;
    pool.check_invariants();
    for (stream_handle s : streams)
      pool.release_stream(s);
    for (std::size_t i = 2; i < streams.size(); ++i)
      backend().destroy_stream(streams[i]);
  }
}

TEST_F(pool_test, a_chunk_left_unused_goes_back_before_a_growth_wherever_its_extents_lie) {
  // A growth adds its chunk to the free extents; a block carved from it and freed goes to the
  // stream's extents, next to the rest of the chunk, still free: the chunk is wholly unused, in
  // two sets that never merge. Growth must see that and give it back (at the second growth that
  // finds it so), as it does a chunk that lies in the free extents alone (here the initial one,
  // never carved).
  for (bool const split : {true, false}) {
    pool_options options;
    options.max_cached_size = 0;
    options.initial_size = split ? 0 : 6 * MiB;
    pool_resource pool(upstream, options);
    if (split) {
      void* p = pool.allocate(5 * MiB, a);  // a chunk of 6 MiB: 1 MiB stays free
      pool.deallocate(p, 5 * MiB, a);
    }
    ASSERT_EQ(pool.statistics().held_bytes, 6 * MiB);
    void* q = pool.allocate(12 * MiB, a);  // the first growth finding it unused keeps it
    EXPECT_EQ(pool.statistics().upstream_deallocations, 0u) << split;
    void* r = pool.allocate(16 * MiB, a);  // the second gives it back
    pool_statistics const st = pool.statistics();
    EXPECT_EQ(st.upstream_deallocations, 1u) << split;
    EXPECT_EQ(st.held_bytes, 28 * MiB) << split;
    pool.check_invariants();
    pool.deallocate(q, 12 * MiB, a);
    pool.deallocate(r, 16 * MiB, a);
    pool.check_invariants();
  }
}

TEST_F(pool_test, large_blocks_of_changing_shapes_reuse_their_chunks) {
  // One stream, blocks above max_cached_size whose sizes change every round (a loop with varying
  // shapes): freed blocks coalesce and the best fit reuses them, so that after the first rounds the
  // pool stops growing and holds well under twice the peak bytes live.
  pool_resource pool(upstream);
  std::mt19937_64 rng(5);
  std::size_t peak_live = 0;
  std::uint64_t growths_after_warm_up = 0;
  for (int round = 0; round < 60; ++round) {
    std::uint64_t const grown = pool.statistics().upstream_allocations;
    std::size_t const unit_bytes = (5 + rng() % 12) * MiB;
    std::vector<std::pair<void*, std::size_t>> live;
    std::size_t live_bytes = 0;
    for (int layer = 0; layer < 8; ++layer) {
      std::size_t const bytes = unit_bytes + layer * 256 * KiB;
      live.emplace_back(pool.allocate(bytes, a), bytes);
      live_bytes += bytes;
    }
    peak_live = std::max(peak_live, live_bytes);
    for (auto it = live.rbegin(); it != live.rend(); ++it)
      pool.deallocate(it->first, it->second, a);
    if (round >= 20) growths_after_warm_up += pool.statistics().upstream_allocations - grown;
  }
  pool_statistics const st = pool.statistics();
  EXPECT_LE(growths_after_warm_up, 2u);
  EXPECT_LT(st.peak_held_bytes, 2 * peak_live)
      << st.peak_held_bytes << " held, " << peak_live << " live at the peak";
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
