// pool_resource's per-stream arenas: a stream carves new blocks from its own extents without the
// pool's mutex, the pool reclaims the blocks parked by other streams only from quiet ones, a double
// free across streams is still caught, a growth leaves room for every stream that ran short, and
// blocks of 1 MiB and more are not left parked whole on the class lists.
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;
using test::random_pairs;
using test::refusing_upstream;

// Sizes 1 KiB-1 MiB, at most 64 blocks live.
constexpr random_pairs::sizes small_blocks{1 * KiB, 1 * MiB, 64};

TEST_F(pool_test, streams_carve_from_their_own_arenas_without_the_pool_mutex) {
  // Two streams churning side by side (one thread, so the count is exact). Once each stream's
  // arena holds what it uses, new blocks are carved there: the pool's mutex is taken for slabs and
  // growth only. Before arenas, every carve took it: about 6 times per 1000 pairs on this mix.
  pool_resource pool(upstream);
  {
    random_pairs on_a(pool, a, 1, small_blocks);
    random_pairs on_b(pool, b, 2, small_blocks);
    test::step_in_turn(on_a, on_b, 40000);  // warm up
    std::uint64_t const before = pool.statistics().lock_acquisitions;
    test::step_in_turn(on_a, on_b, 40000);
    std::uint64_t const locks = pool.statistics().lock_acquisitions - before;
    EXPECT_LT(locks, 40u) << locks << " mutex acquisitions for 80000 operations";
    pool.check_invariants();
  }
  pool.check_invariants();
}

TEST_F(pool_test, blocks_are_reclaimed_only_from_streams_that_stopped_allocating) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  pool_options options;
  options.chunk_size = 8 * MiB;
  options.max_cached_size = 4 * MiB;  // 1 MiB blocks are cached sizes: parked when freed
  pool_resource pool(upstream, options);
  // b parks 32 MiB (four chunks) in its thread cache, class lists and arena.
  auto churn_on_b = [&](int n) {
    std::vector<void*> blocks;
    for (int i = 0; i < n; ++i)
      blocks.push_back(pool.allocate(1 * MiB, b));
    for (void* p : blocks)
      pool.deallocate(p, 1 * MiB, b);
  };
  churn_on_b(32);
  void* const b_large = pool.allocate(8 * MiB, b);  // above max_cached_size: freed to b's extents
  std::vector<void*> taken;
  auto take_on_a = [&](int n) {
    for (int i = 0; i < n; ++i)
      taken.push_back(pool.allocate(1 * MiB, a));
  };
  // b has work in flight throughout (held back by the gate): it is never idle, so none of its
  // extents can be taken at once (pool_idle_take_test.cpp), only fenced by a reclaim.
  test::stream_gate busy;
  busy.block(b);
  // While b keeps allocating (more than its thread cache holds, so it refills), a's misses grow
  // the pool instead of taking b's blocks: b would only miss in turn.
  for (int round = 0; round < 4; ++round) {
    churn_on_b(8);
    take_on_a(2);
  }
  EXPECT_EQ(pool.statistics().reclaims, 0u);
  // Once b is quiet, a's next misses reclaim its parked blocks: they merge into b's extents, and b
  // is asked to fence them (a call on a may not use b's handle); meanwhile a grows.
  take_on_a(16);
  EXPECT_GE(pool.statistics().reclaims, 1u);
  // b's next call (a large free) records the fence, which completes once b's work has run.
  std::uint64_t const events = pool.statistics().events_recorded;
  pool.deallocate(b_large, 8 * MiB, b);
  EXPECT_GT(pool.statistics().events_recorded, events) << "b's free did not fence what a wanted";
  busy.open();
  backend().synchronize_stream(b);
  std::size_t const held = pool.statistics().held_bytes;
  take_on_a(16);
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.idle_takes, 0u);
  EXPECT_LT(st.held_bytes, held + 16 * MiB) << "a grew by all it took";
  for (void* p : taken)
    pool.deallocate(p, 1 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_large_block_freed_again_on_another_stream_is_ignored) {
  // Each stream's extents are a set of their own: the second free, on b, must still be seen to
  // overlap a's extents, or a and b would both get the block.
  pool_resource pool(upstream);
  void* p = pool.allocate(8 * MiB, a);
  pool.deallocate(p, 8 * MiB, a);
  pool.deallocate(p, 8 * MiB, b);  // logged and ignored
  void* on_a = pool.allocate(8 * MiB, a);
  void* on_b = pool.allocate(8 * MiB, b);
  EXPECT_NE(on_a, on_b);
  pool.check_invariants();
  pool.deallocate(on_a, 8 * MiB, a);
  pool.deallocate(on_b, 8 * MiB, b);
  backend().synchronize();
  pool.check_invariants();
}

TEST_F(pool_test, a_growth_leaves_room_for_every_stream_that_ran_short) {
  refusing_upstream up(upstream);
  pool_options options;
  options.chunk_size = 8 * MiB;
  options.initial_size = 80 * MiB;     // a share of 26 MiB per stream (3 streams): no cap below
  options.max_cached_size = 64 * KiB;  // 1 MiB and up: straight to the best fit
  stream_handle const c = backend().create_stream(true);
  {
    pool_resource pool(up, options);
    void* most = pool.allocate(79 * MiB, a);  // fits: a is not short
    ASSERT_EQ(up.granted, std::vector<std::size_t>{80 * MiB});
    // a and c run short while the upstream refuses (as when they miss at the same time and
    // another thread's growth is under way); b then grows for all three.
    up.refusing = true;
    EXPECT_THROW(pool.allocate(2 * MiB, a), out_of_memory);
    EXPECT_THROW(pool.allocate(2 * MiB, c), out_of_memory);
    up.refusing = false;
    void* on_b = pool.allocate(2 * MiB, b);
    ASSERT_EQ(up.granted.size(), 2u);
    EXPECT_EQ(up.granted[1], 3 * 8 * MiB);
    // a and c now fit without growing; the count starts again after a growth.
    void* on_a = pool.allocate(6 * MiB, a);
    void* on_c = pool.allocate(6 * MiB, c);
    EXPECT_EQ(up.granted.size(), 2u);
    void* more_b = pool.allocate(11 * MiB, b);  // 10 MiB left: b alone is short
    ASSERT_EQ(up.granted.size(), 3u);
    EXPECT_EQ(up.granted[2], 12 * MiB) << "the request (rounded to 2 MiB), not three chunks";
    pool.check_invariants();
    pool.deallocate(most, 79 * MiB, a);
    pool.deallocate(on_a, 6 * MiB, a);
    pool.deallocate(on_b, 2 * MiB, b);
    pool.deallocate(more_b, 11 * MiB, b);
    pool.deallocate(on_c, 6 * MiB, c);
    pool.release_stream(c);
  }
  backend().destroy_stream(c);
}

TEST_F(pool_test, a_shared_growth_is_held_to_the_pools_share_and_falls_back_to_one_chunk) {
  // Streams short at once may all grow at once: each step is held to the pool's share per stream
  // (held / streams seen, rounded down to 2 MiB). A step the upstream refuses is retried as one
  // chunk before the bare request.
  refusing_upstream up(upstream);
  pool_options options;
  options.chunk_size = 8 * MiB;
  options.initial_size = 50 * MiB;
  options.max_cached_size = 64 * KiB;
  stream_handle const c = backend().create_stream(true);
  {
    pool_resource pool(up, options);
    void* most = pool.allocate(49 * MiB, a);
    up.refusing = true;
    EXPECT_THROW(pool.allocate(2 * MiB, a), out_of_memory);
    EXPECT_THROW(pool.allocate(2 * MiB, c), out_of_memory);
    up.refusing = false;
    // 24 MiB wanted; the share is 50 / 3 -> 16 MiB. (A smaller block would take a slab of b's
    // growth step, 8 MiB, for b's next blocks.)
    void* on_b = pool.allocate(8 * MiB, b);
    ASSERT_EQ(up.granted, (std::vector<std::size_t>{50 * MiB, 16 * MiB}));
    void* fill = pool.allocate(8 * MiB, a);  // fits: 1 MiB left
    up.refusing = true;
    EXPECT_THROW(pool.allocate(2 * MiB, c), out_of_memory);  // c short again
    up.refusing = false;
    up.refuse_above = 8 * MiB;
    void* small = pool.allocate(2 * MiB, a);  // 16 MiB wanted for a and c: refused; one chunk
    ASSERT_EQ(up.granted, (std::vector<std::size_t>{50 * MiB, 16 * MiB, 8 * MiB}));
    pool.deallocate(small, 2 * MiB, a);
    pool.deallocate(fill, 8 * MiB, a);
    pool.deallocate(most, 49 * MiB, a);
    pool.deallocate(on_b, 8 * MiB, b);
    pool.check_invariants();
    pool.release_stream(c);
  }
  backend().destroy_stream(c);
}

// Eight shapes, each a distinct size class between 1 and 4 MiB (classes are at most 12.5% apart).
constexpr std::size_t shape_bytes[] = {1 * MiB,    1228 * KiB, 1484 * KiB, 1792 * KiB,
                                       2150 * KiB, 2580 * KiB, 3100 * KiB, 3700 * KiB};

TEST_F(pool_test, blocks_of_shapes_gone_by_serve_the_next_shapes) {
  // A loop whose shapes change every step: 16 blocks of one shape live at a time, the shape
  // changing each step. Blocks of 1 MiB and more are not parked whole on the stream's lists past
  // its bound (8 MiB here): they merge back into its extents, where the next shape's blocks are
  // carved. Parked whole, the blocks of each shape stayed on their class's list and the pool grew
  // for the next shapes: 104 MiB held at the peak for 60 MiB live (72 MiB with the bound). The
  // same in an expandable pool, whose range changes size under the lock the merges take.
  for (bool expandable : {false, true}) {
    SCOPED_TRACE(expandable ? "expandable" : "chunked");
    pool_options options;
    options.expandable = expandable;
    options.max_cached_size = 4 * MiB;  // the shapes are cached sizes (the merged classes)
    pool_resource pool(upstream, options);
    std::size_t peak_live = 0;
    for (int round = 0; round < 3; ++round)
      for (std::size_t shape : shape_bytes) {
        std::vector<void*> blocks;
        for (int i = 0; i < 16; ++i)
          blocks.push_back(pool.allocate(shape, a));
        peak_live = std::max(peak_live, pool.statistics().live_bytes);
        for (void* p : blocks)
          pool.deallocate(p, shape, a);
      }
    pool_statistics const st = pool.statistics();
    EXPECT_LE(st.peak_held_bytes, peak_live * 3 / 2)
        << st.peak_held_bytes << " B held at the peak for " << peak_live << " B live";
    pool.check_invariants();
  }
}

TEST_F(pool_test, a_thread_that_exits_leaves_no_more_than_the_bound_of_large_classes_listed) {
  // A thread's cache goes to its stream's lists when the thread exits; blocks of 1 MiB and more
  // beyond the stream's bound (8 MiB here) merge back into the stream's extents.
  pool_options options;
  options.max_cached_size = 4 * MiB;  // the shapes are cached sizes (the merged classes)
  pool_resource pool(upstream, options);
  std::thread([&] {
    std::vector<void*> blocks;
    for (std::size_t shape : shape_bytes)
      for (int i = 0; i < 4; ++i)
        blocks.push_back(pool.allocate(shape, a));
    for (std::size_t i = 0; i < blocks.size(); ++i)
      pool.deallocate(blocks[i], shape_bytes[i / 4], a);
  }).join();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_LE(st.cached_bytes, 8 * MiB) << "parked whole on the stream's lists";
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
