// pool_resource's large misses and growth steps: a miss carved from the free extents takes a slab
// for its stream when other streams allocate too (bounded by the stream's growth step and its
// share of the pool) and the whole extent in a pool used from one stream (never in an expandable
// pool, after a failed growth or near maximum_size), a
// chunked pool grows by at least the largest block it grew for lately (trim() forgets it), and
// steps and slabs keep every block aligned whatever chunk_size is given.
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;
using test::refusing_upstream;

// Large-path options: every block above max_cached_size.
pool_options large_only(std::size_t initial, std::size_t chunk) {
  pool_options options;
  options.max_cached_size = 0;
  options.initial_size = initial;
  options.chunk_size = chunk;
  return options;
}

TEST_F(pool_test, a_large_miss_takes_a_slab_of_the_free_memory_for_the_streams_next_blocks) {
  // With more than one stream, a large block that misses its stream's extents and is carved from
  // the free ones takes a slab with it (the stream's growth step, at most its share of the pool):
  // the stream's next blocks come from its own extents under its lock alone, and streams carving
  // one free extent block by block do not interleave their blocks.
  pool_options options = large_only(64 * MiB, 16 * MiB);
  options.max_cached_size = 4 * KiB;  // a small block puts a stream in the pool first
  pool_resource pool(upstream, options);
  // Each small block brings its stream a slab of at most 8 MiB for its class: the large blocks
  // below are larger, so that they miss.
  void* small_on_a = pool.allocate(256, a);
  void* small_on_b = pool.allocate(256, b);
  void* on_b = pool.allocate(12 * MiB, b);  // 12 MiB and a slab of 4 more for b
  pool_statistics const before = pool.statistics();
  void* first = pool.allocate(10 * MiB, a);  // a miss: 10 MiB and a slab of 6 more for a
  pool_statistics const after_miss = pool.statistics();
  EXPECT_EQ(after_miss.stream_bytes - before.stream_bytes, 6 * MiB);
  EXPECT_EQ(before.free_bytes - after_miss.free_bytes, 16 * MiB);
  std::vector<void*> next;
  for (int i = 0; i < 3; ++i)
    next.push_back(pool.allocate(2 * MiB, a));
  pool_statistics const after_next = pool.statistics();
  EXPECT_EQ(after_next.lock_acquisitions, after_miss.lock_acquisitions)
      << "the next blocks come from a's slab without the pool's mutex";
  EXPECT_EQ(after_next.stream_bytes, before.stream_bytes);
  EXPECT_EQ(after_next.free_bytes, after_miss.free_bytes);
  pool.check_invariants();
  pool.deallocate(on_b, 12 * MiB, b);
  pool.deallocate(small_on_b, 256, b);
  for (void* p : next)
    pool.deallocate(p, 2 * MiB, a);
  pool.deallocate(first, 10 * MiB, a);
  pool.deallocate(small_on_a, 256, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_pool_used_from_one_stream_gives_it_the_whole_free_extent_on_a_large_miss) {
  // No other stream could use the rest: with the stream's, what it frees next to the rest merges
  // with it, and its next blocks need no mutex. A free extent and a stream's never merge.
  pool_resource pool(upstream, large_only(64 * MiB, 16 * MiB));
  void* first = pool.allocate(4 * MiB, a);
  pool_statistics const after_miss = pool.statistics();
  EXPECT_EQ(after_miss.stream_bytes, 60 * MiB);
  EXPECT_EQ(after_miss.free_bytes, 0u);
  pool.deallocate(first, 4 * MiB, a);
  void* whole = pool.allocate(64 * MiB, a);  // the chunk in one extent of a's: no growth, no mutex
  pool_statistics const after = pool.statistics();
  EXPECT_EQ(after.upstream_allocations, after_miss.upstream_allocations);
  EXPECT_EQ(after.lock_acquisitions, after_miss.lock_acquisitions);
  pool.check_invariants();
  pool.deallocate(whole, 64 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_stream_that_took_the_whole_extent_fences_it_when_a_second_stream_comes) {
  // b, alone, takes the whole extent; a arrives and, finding nothing free, grows. b is asked to
  // fence what it holds in its next call: a's next miss then finds it free, without growing.
  pool_resource pool(upstream, large_only(64 * MiB, 16 * MiB));
  void* on_b = pool.allocate(4 * MiB, b);
  EXPECT_EQ(pool.statistics().stream_bytes, 60 * MiB);
  void* on_a = pool.allocate(2 * MiB, a);
  pool.deallocate(on_b, 4 * MiB, b);  // b's next call: the fence
  EXPECT_EQ(pool.statistics().events_recorded, 1u);
  backend().synchronize();
  std::uint64_t const grown = pool.statistics().upstream_allocations;
  void* big = pool.allocate(48 * MiB, a);
  EXPECT_EQ(pool.statistics().upstream_allocations, grown) << "b's 64 MiB did not come back";
  pool.check_invariants();
  pool.deallocate(big, 48 * MiB, a);
  pool.deallocate(on_a, 2 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, no_slab_when_the_pool_cannot_grow_a_step_more) {
  // At maximum_size, or after a growth failed (the device is full), memory moved to one stream
  // would only make the next stream's miss reclaim it (a fence, or a wait for that stream's
  // work): the block goes alone.
  for (bool const refused : {false, true}) {
    refusing_upstream up(upstream);
    pool_options options = large_only(64 * MiB, 16 * MiB);
    if (!refused) options.maximum_size = 64 * MiB;
    pool_resource pool(up, options);
    if (refused) {
      up.refusing = true;
      EXPECT_THROW(pool.allocate(128 * MiB, b), out_of_memory);
      up.refusing = false;
    }
    void* on_b = pool.allocate(4 * MiB, b);  // one stream, but no step more: the block alone
    EXPECT_EQ(pool.statistics().stream_bytes, 0u) << refused;
    std::uint64_t const reclaims = pool.statistics().reclaims;  // the refused request's
    void* on_a = pool.allocate(2 * MiB, a);
    EXPECT_EQ(pool.statistics().stream_bytes, 0u) << refused;
    void* rest = pool.allocate(58 * MiB, b);  // all that is left, without a reclaim
    EXPECT_EQ(pool.statistics().reclaims, reclaims) << refused;
    pool.check_invariants();
    pool.deallocate(rest, 58 * MiB, b);
    pool.deallocate(on_a, 2 * MiB, a);
    pool.deallocate(on_b, 4 * MiB, b);
    pool.check_invariants();
  }
}

TEST_F(pool_test, a_chunked_pool_grows_by_at_least_the_largest_block_it_has_grown_for) {
  // Chunks never merge: a chunk smaller than the workload's largest blocks cannot serve them. Once
  // the pool has grown for a block, later growths take at least that much (at most eight
  // chunk_size), so that every chunk can serve every block.
  pool_resource pool(upstream, large_only(0, 4 * MiB));
  void* big = pool.allocate(20 * MiB, a);
  EXPECT_EQ(pool.statistics().held_bytes, 20 * MiB);
  void* small = pool.allocate(2 * MiB, a);  // the step would be chunk_size: 20 MiB instead
  EXPECT_EQ(pool.statistics().held_bytes, 40 * MiB);
  void* bigger = pool.allocate(40 * MiB, a);  // 40 MiB: more than eight chunk_size
  EXPECT_EQ(pool.statistics().held_bytes, 80 * MiB);
  void* again = pool.allocate(20 * MiB, a);  // 18 MiB free: a step of 32 MiB (the cap)
  EXPECT_EQ(pool.statistics().held_bytes, 112 * MiB);
  pool.check_invariants();
  pool.deallocate(again, 20 * MiB, a);
  pool.deallocate(bigger, 40 * MiB, a);
  pool.deallocate(small, 2 * MiB, a);
  pool.deallocate(big, 20 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_slab_is_held_to_the_streams_share_of_the_pool) {
  // Four streams allocating from 64 MiB (small blocks first, so that all four are known): a step
  // is 32 MiB, a share 16 MiB.
  stream_handle const c = backend().create_stream(true);
  stream_handle const d = backend().create_stream(true);
  {
    pool_options options = large_only(64 * MiB, 32 * MiB);
    options.max_cached_size = 64 * KiB;
    pool_resource pool(upstream, options);
    std::vector<std::pair<void*, stream_handle>> small;
    for (stream_handle s : {a, c, d})
      small.emplace_back(pool.allocate(4 * KiB, s), s);
    std::size_t const before = pool.statistics().stream_bytes;
    void* on_b = pool.allocate(2 * MiB, b);
    EXPECT_EQ(pool.statistics().stream_bytes - before, 14 * MiB);
    pool.check_invariants();
    pool.deallocate(on_b, 2 * MiB, b);
    for (auto const& [p, s] : small)
      pool.deallocate(p, 4 * KiB, s);
    for (stream_handle s : {c, d})
      pool.release_stream(s);
    pool.check_invariants();
  }
  backend().destroy_stream(c);
  backend().destroy_stream(d);
}

TEST_F(pool_test, no_slab_while_no_other_stream_allocates) {
  // A stream used once (here the null stream, as an application's set-up may) is quiet after the
  // next growth: a single stream's misses then carve the block alone.
  pool_resource pool(upstream, large_only(64 * MiB, 16 * MiB));
  pool.deallocate(pool.allocate(4 * MiB, nullptr), 4 * MiB, nullptr);
  void* big = pool.allocate(80 * MiB, a);                     // a growth
  std::size_t const before = pool.statistics().stream_bytes;  // the null stream's 4 MiB
  void* small = pool.allocate(2 * MiB, a);
  EXPECT_EQ(pool.statistics().stream_bytes, before);
  pool.check_invariants();
  pool.deallocate(small, 2 * MiB, a);
  pool.deallocate(big, 80 * MiB, a);
}

TEST_F(pool_test, an_expandable_pool_takes_no_slab) {
  // Its growth moves pages from the free extents and the growing stream's own: a slab parked on
  // another stream could not move.
  pool_options options = large_only(0, 32 * MiB);
  options.expandable = true;
  pool_resource pool(upstream, options);
  void* on_b = pool.allocate(4 * MiB, b);
  void* grown = pool.allocate(60 * MiB, b);
  pool.deallocate(grown, 60 * MiB, b);
  pool.release_stream(b);  // what b freed is free for all
  void* on_a = pool.allocate(2 * MiB, a);
  EXPECT_EQ(pool.statistics().stream_bytes, 0u);
  pool.check_invariants();
  pool.deallocate(on_a, 2 * MiB, a);
  pool.deallocate(on_b, 4 * MiB, b);
}

TEST_F(pool_test, blocks_stay_aligned_whatever_chunk_size_is_given) {
  // A chunk_size that is not a multiple of 256 bytes (50 MB in decimal) must not make a step or a
  // slab cut a free extent at an unaligned address.
  pool_resource pool(upstream, large_only(200 * MiB, 50'000'000));
  std::vector<std::pair<void*, std::size_t>> blocks;
  blocks.emplace_back(pool.allocate(4 * MiB, b), 4 * MiB);
  blocks.emplace_back(pool.allocate(2 * MiB, a), 2 * MiB);
  blocks.emplace_back(pool.allocate(3 * MiB, b), 3 * MiB);
  blocks.emplace_back(pool.allocate(300 * MiB, a), 300 * MiB);  // growth steps from chunk_size too
  blocks.emplace_back(pool.allocate(3 * MiB, a), 3 * MiB);
  for (auto const& [p, bytes] : blocks)
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u) << p << " of " << bytes << " B";
  pool.check_invariants();
  for (std::size_t i = 0; i < blocks.size(); ++i)
    pool.deallocate(blocks[i].first, blocks[i].second, i == 0 || i == 2 ? b : a);
  pool.check_invariants();
}

TEST_F(pool_test, trim_forgets_the_largest_block_a_pool_grew_for) {
  pool_resource pool(upstream, large_only(0, 4 * MiB));
  pool.deallocate(pool.allocate(40 * MiB, a), 40 * MiB, a);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  void* p = pool.allocate(1 * MiB, a);  // a young pool's step again: 2 MiB
  EXPECT_EQ(pool.statistics().held_bytes, 2 * MiB);
  pool.deallocate(p, 1 * MiB, a);
}

TEST_F(pool_test, slabs_of_threads_that_exit_come_back_to_the_pool) {
  // Threads on their per-thread streams take slabs while another stream allocates, then exit: what
  // their slabs held comes back (none of it stays with a stream that is gone), and the pool keeps
  // no state for them.
  pool_resource pool(upstream, large_only(64 * MiB, 16 * MiB));
  stream_handle const per_thread = backend().per_thread_default_stream();
  void* on_a = pool.allocate(4 * MiB, a);  // a allocates: misses elsewhere take slabs
  for (int i = 0; i < 8; ++i) {
    std::thread t([&] {
      void* p = pool.allocate(2 * MiB, per_thread);
      EXPECT_GE(pool.statistics().stream_bytes, 14 * MiB) << "no slab taken";
      pool.deallocate(p, 2 * MiB, per_thread);
    });
    t.join();
    pool.deallocate(pool.allocate(1 * MiB, a), 1 * MiB, a);  // a keeps allocating
  }
  backend().synchronize();
  pool.check_invariants();
  pool.deallocate(on_a, 4 * MiB, a);
  pool.release_stream(a);
  pool.trim();
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.stream_bytes, 0u);
  EXPECT_EQ(st.held_bytes, 0u);
  EXPECT_EQ(st.streams, 0u);
}

}  // namespace
}  // namespace gpumem
