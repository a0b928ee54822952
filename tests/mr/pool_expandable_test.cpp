// pool_resource with pool_options::expandable: the pool is one chunk of a reserved range whose
// pages are mapped where blocks are, so a large block needs only the pages it lacks, pages lying
// wholly in free memory give their memory to new blocks elsewhere, and trim() unmaps every free
// page. Runs on both backends (the host backend simulates the virtual-memory calls over its arena).
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpumem {
namespace {

using test::pool_test;

pool_options exact_blocks(bool expandable) {
  pool_options o;
  o.expandable = expandable;
  o.chunk_size = 2 * MiB;
  o.max_cached_size = 0;  // every block through the coalescing best fit: the layout is exact
  return o;
}

TEST_F(pool_test, an_expandable_pool_grows_one_range_and_a_large_block_spans_its_pieces) {
  pool_resource pool(upstream, exact_blocks(true));
  void* small = pool.allocate(1 * MiB, a);  // maps one 2 MiB page
  // 1 MiB is free on that page: only two pages more are mapped, right after it.
  void* large = pool.allocate(5 * MiB, a);
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 6 * MiB);
  EXPECT_EQ(st.chunks, 1u);
  EXPECT_EQ(st.upstream_allocations, 3u);  // pages made
  EXPECT_EQ(static_cast<char*>(large), static_cast<char*>(small) + 1 * MiB);
  pool.check_invariants();

  // The block is real memory across the boundary of the two pieces.
  std::vector<std::uint8_t> out(5 * MiB);
  backend().fill(large, 0x5a, 5 * MiB);
  backend().copy(out.data(), large, out.size());
  EXPECT_EQ(out.front(), 0x5a);
  EXPECT_EQ(out[1 * MiB], 0x5a);  // the first byte of the second piece
  EXPECT_EQ(out.back(), 0x5a);

  // trim() unmaps the pages lying wholly in free memory; the first one holds a live block.
  pool.deallocate(large, 5 * MiB, a);
  EXPECT_EQ(pool.trim(), 4 * MiB);
  st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 2 * MiB);
  EXPECT_EQ(st.upstream_deallocations, 2u);
  pool.check_invariants();
  pool.deallocate(small, 1 * MiB, a);
  EXPECT_EQ(pool.trim(), 2 * MiB);
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  EXPECT_EQ(pool.statistics().free_bytes, 0u) << "address space without memory counted as free";
  pool.check_invariants();

  // And it grows again from the start of the range.
  void* again = pool.allocate(3 * MiB, a);
  EXPECT_EQ(again, small);
  pool.deallocate(again, 3 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_chunked_pool_needs_a_second_chunk_for_the_same_requests) {
  // The same two requests without expandable: the 5 MiB block cannot use the 1 MiB free after the
  // first block, and the first chunk cannot be given back while that block lives.
  pool_resource pool(upstream, exact_blocks(false));
  void* small = pool.allocate(1 * MiB, a);
  void* large = pool.allocate(5 * MiB, a);
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 8 * MiB);
  EXPECT_EQ(st.chunks, 2u);
  pool.deallocate(large, 5 * MiB, a);
  pool.deallocate(small, 1 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, an_expandable_pool_respects_its_maximum_and_reports_out_of_memory) {
  pool_options o = exact_blocks(true);
  o.maximum_size = 6 * MiB;
  pool_resource pool(upstream, o);
  void* p = pool.allocate(4 * MiB, a);
  try {
    pool.allocate(3 * MiB, a);
    FAIL() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string(e.what()).find("requested 3.00 MiB"), std::string::npos) << e.what();
  }
  void* q = pool.allocate(2 * MiB, a);  // exactly the maximum
  EXPECT_EQ(pool.statistics().held_bytes, 6 * MiB);
  pool.deallocate(q, 2 * MiB, a);
  pool.deallocate(p, 4 * MiB, a);
  pool.check_invariants();
}

// Blocks of changing sizes leave holes between the live ones. In a chunked pool (or one mapped
// contiguously) a hole too small for the next block is memory held for nothing; here the pages
// lying wholly in holes give their memory to the next block, so the pool holds about what is live.
TEST_F(pool_test, an_expandable_pool_moves_the_memory_of_holes_to_new_blocks) {
  pool_resource pool(upstream, exact_blocks(true));
  std::vector<void*> keep;
  std::vector<void*> holes;
  for (int i = 0; i < 8; ++i) {  // 8 MiB holes between 2 MiB live blocks
    holes.push_back(pool.allocate(8 * MiB, a));
    keep.push_back(pool.allocate(2 * MiB, a));
    backend().fill(keep.back(), 0x40 + i, 2 * MiB);
  }
  for (void* p : holes)
    pool.deallocate(p, 8 * MiB, a);
  backend().synchronize_stream(a);
  std::size_t const held = pool.statistics().held_bytes;
  EXPECT_EQ(held, 80 * MiB);
  // 48 MiB in one block: no hole holds it, so it takes new address space, and the pages of the
  // holes (the stream is idle: its freed memory is free for all) give it their memory.
  void* big = pool.allocate(48 * MiB, a);
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().held_bytes, held) << "new memory taken while holes held enough";
  std::vector<std::uint8_t> out(48 * MiB);
  backend().fill(big, 0x3c, 48 * MiB);
  backend().copy(out.data(), big, out.size());
  EXPECT_EQ(out.front(), 0x3c);
  EXPECT_EQ(out.back(), 0x3c);
  std::vector<std::uint8_t> kept(2 * MiB);
  for (int i = 0; i < 8; ++i) {  // the live blocks kept their pages and their contents
    backend().copy(kept.data(), keep[i], kept.size());
    EXPECT_EQ(kept.front(), 0x40 + i);
    EXPECT_EQ(kept.back(), 0x40 + i);
    pool.deallocate(keep[i], 2 * MiB, a);
  }
  pool.deallocate(big, 48 * MiB, a);
  backend().synchronize_stream(a);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  pool.check_invariants();
}

// The same with the holes already free for every stream (their stream released): pages move only
// once free memory passes an eighth of what the pool holds; below that, new pages are made.
TEST_F(pool_test, an_expandable_pool_moves_pages_only_past_its_slack) {
  pool_resource pool(upstream, exact_blocks(true));
  void* hole1 = pool.allocate(8 * MiB, a);
  void* live1 = pool.allocate(40 * MiB, a);
  void* hole2 = pool.allocate(16 * MiB, a);
  void* live2 = pool.allocate(64 * MiB, a);  // the pool holds 128 MiB
  pool.deallocate(hole1, 8 * MiB, a);
  pool.release_stream(a);                   // 8 MiB free for all: below the slack of 16 MiB
  void* more = pool.allocate(12 * MiB, b);  // fits no hole: new address space, new pages
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 140 * MiB);
  EXPECT_EQ(st.page_unmaps, 0u);
  pool.deallocate(hole2, 16 * MiB, a);
  pool.release_stream(a);                    // 24 MiB free for all: past the slack of 17.5 MiB
  void* again = pool.allocate(20 * MiB, b);  // fits no hole: takes the holes' pages
  st = pool.statistics();
  EXPECT_EQ(st.page_unmaps, 10u);
  EXPECT_EQ(st.held_bytes, 140 * MiB) << "new pages made while free memory passed the slack";
  EXPECT_EQ(st.free_bytes, 4 * MiB);
  pool.check_invariants();
  for (auto [p, bytes] : {std::pair{again, 20 * MiB}, {more, 12 * MiB}})
    pool.deallocate(p, bytes, b);
  for (auto [p, bytes] : {std::pair{live1, 40 * MiB}, {live2, 64 * MiB}})
    pool.deallocate(p, bytes, a);
  pool.release_stream(a);
  pool.release_stream(b);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
}

TEST_F(pool_test, an_expandable_pool_with_blocks_of_every_size_keeps_its_invariants) {
  pool_options o;
  o.expandable = true;
  o.chunk_size = 2 * MiB;
  pool_resource pool(upstream, o);
  std::vector<std::pair<void*, std::size_t>> live;
  std::size_t size = 3000;
  for (int i = 0; i < 200; ++i) {
    size = size * 7 % (9 * MiB) + 512;
    stream_handle const s = i % 3 == 0 ? b : a;
    live.emplace_back(pool.allocate(size, s), size);
    if (i % 4 == 3) {
      pool.deallocate(live.front().first, live.front().second, s);
      live.erase(live.begin());
    }
  }
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().chunks, 1u);
  for (auto const& [p, bytes] : live)
    pool.deallocate(p, bytes, a);
  // Fences recorded on the streams may still be pending: wait for both, then give all back.
  pool.release_stream(a);
  pool.release_stream(b);
  pool.trim();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
