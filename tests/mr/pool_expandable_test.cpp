// pool_resource with pool_options::expandable: growth maps physical memory at the end of one
// reserved range, so the pool stays one chunk, a large block needs only what the free end lacks,
// and trim() unmaps whole pieces from the free end. Runs on both backends (the host backend
// simulates the virtual-memory calls over its arena).
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
  void* small = pool.allocate(1 * MiB, a);  // maps 2 MiB
  // 1 MiB is free at the end: only 4 MiB more are mapped, right after it.
  void* large = pool.allocate(5 * MiB, a);
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 6 * MiB);
  EXPECT_EQ(st.chunks, 1u);
  EXPECT_EQ(st.upstream_allocations, 2u);
  EXPECT_EQ(static_cast<char*>(large), static_cast<char*>(small) + 1 * MiB);
  pool.check_invariants();

  // The block is real memory across the boundary of the two pieces.
  std::vector<std::uint8_t> out(5 * MiB);
  backend().fill(large, 0x5a, 5 * MiB);
  backend().copy(out.data(), large, out.size());
  EXPECT_EQ(out.front(), 0x5a);
  EXPECT_EQ(out[1 * MiB], 0x5a);  // the first byte of the second piece
  EXPECT_EQ(out.back(), 0x5a);

  // trim() unmaps the whole pieces at the free end; the first piece holds a live block.
  pool.deallocate(large, 5 * MiB, a);
  EXPECT_EQ(pool.trim(), 4 * MiB);
  st = pool.statistics();
  EXPECT_EQ(st.held_bytes, 2 * MiB);
  EXPECT_EQ(st.upstream_deallocations, 1u);
  pool.check_invariants();
  pool.deallocate(small, 1 * MiB, a);
  EXPECT_EQ(pool.trim(), 2 * MiB);
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  EXPECT_EQ(pool.statistics().chunks, 0u);
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
