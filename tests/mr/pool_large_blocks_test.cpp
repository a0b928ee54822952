// The map of live large blocks (src/mr/pool_large_blocks.hpp, private to the pool, compiled into
// this test): the granule each smallest block gives, exact liveness (no other address of a granule
// is live), the addresses a block holds (its first granule), a double free or a wrong size refused,
// blocks that the map cannot hold (two in one granule, regions past its room) kept in the overflow
// table and found there, replacement at one address, foreign addresses (0, 1, unmapped regions, the
// top of the address space), and threads that insert and remove at once, on their own entries and
// on one.
#include "pool_large_blocks.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpumem::detail {
namespace {

constexpr std::uintptr_t base = std::uintptr_t{1} << 40;
constexpr std::uintptr_t region = std::uintptr_t{1} << pool_large_blocks::region_shift;

TEST(pool_large_blocks, the_granule_is_the_largest_power_of_two_within_the_smallest_block) {
  EXPECT_EQ(pool_large_blocks().granule(), 64u << 10);
  EXPECT_EQ(pool_large_blocks(256).granule(), 64u << 10);
  EXPECT_EQ(pool_large_blocks((256u << 10) + 1).granule(), 256u << 10);
  EXPECT_EQ(pool_large_blocks(512u << 10).granule(), 512u << 10);
  EXPECT_EQ(pool_large_blocks((std::size_t{4} << 30) + 1).granule(), region);
}

TEST(pool_large_blocks, a_block_is_live_at_its_own_address_alone_and_removed_once_with_its_size) {
  pool_large_blocks table((256u << 10) + 1);
  pool_chunk chunk;
  constexpr std::size_t blocks = 5000;  // about 10 regions
  std::size_t const g = table.granule();
  // Blocks of a granule and more, two granules apart, each at another offset in its granule.
  auto const at = [&](std::size_t i) { return base + 2 * i * g + (i % 7) * 256; };
  auto const size = [&](std::size_t i) { return g + 256 * (1 + i % 100); };
  for (std::size_t i = 0; i < blocks; ++i)
    table.insert(at(i), {size(i), &chunk});
  EXPECT_EQ(table.overflowed(), 0u);
  for (std::size_t i = 0; i < blocks; ++i) {
    ASSERT_TRUE(table.live(at(i))) << i;
    ASSERT_FALSE(table.live(at(i) + 256)) << i;  // inside the block
  }
  for (std::size_t i = 0; i < blocks; i += 2) {
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(at(i), size(i) + 256, found), pool_large_blocks::outcome::wrong_size);
    ASSERT_EQ(table.remove(at(i) + 256, size(i), found), pool_large_blocks::outcome::not_live);
    ASSERT_EQ(table.remove(at(i), size(i), found), pool_large_blocks::outcome::removed);
    EXPECT_EQ(found, &chunk);
    ASSERT_EQ(table.remove(at(i), size(i), found), pool_large_blocks::outcome::not_live);
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_EQ(table.live(at(i)), i % 2 == 1) << i;
  for (std::size_t i = 1; i < blocks; i += 2) {
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(at(i), size(i), found), pool_large_blocks::outcome::removed) << i;
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_FALSE(table.live(at(i))) << i;
}

TEST(pool_large_blocks, a_block_holds_the_addresses_of_its_first_granule) {
  // holds(): a block's own address and every address up to at least one granule past it; beyond
  // the granule after its own, not seen; never an address past its end or before its start.
  pool_large_blocks table((256u << 10) + 1);
  pool_chunk chunk;
  std::size_t const g = table.granule();
  for (std::size_t const offset : {std::size_t{0}, std::size_t{256}, g / 2, g - 256}) {
    std::uintptr_t const start = base + 8 * g + offset;  // somewhere in its granule
    std::size_t const size = 3 * g;
    table.insert(start, {size, &chunk});
    EXPECT_TRUE(table.holds(start)) << offset;
    EXPECT_FALSE(table.holds(start - 256)) << offset;
    for (std::size_t inside = 256; inside <= g; inside += g / 4)
      EXPECT_TRUE(table.holds(start + inside)) << offset << " + " << inside;
    EXPECT_TRUE(table.live(start));
    EXPECT_FALSE(table.live(start + 256));  // live() stays exact
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(start, size, found), pool_large_blocks::outcome::removed);
    for (std::size_t inside = 0; inside < 2 * g; inside += g / 4)
      EXPECT_FALSE(table.holds(start + inside)) << offset << " + " << inside;
  }
  // A short block (one granule and 256 bytes) holds nothing past its end.
  std::uintptr_t const start = base + 20 * g + g / 2;
  table.insert(start, {g + 256, &chunk});
  EXPECT_TRUE(table.holds(start + g));
  EXPECT_FALSE(table.holds(start + g + 256));
  EXPECT_FALSE(table.holds(start + g + g / 2));
  // The first granule of a region, whose previous granule is another region's.
  std::uintptr_t const edge = base + 4 * region - 256;
  table.insert(edge, {g, &chunk});
  EXPECT_TRUE(table.holds(edge + 256));
  EXPECT_TRUE(table.holds(edge + g - 256));
  EXPECT_FALSE(table.holds(edge + g));
  EXPECT_FALSE(table.holds(0));
  EXPECT_FALSE(table.holds(1));
  EXPECT_FALSE(table.holds(~std::uintptr_t{0}));
}

TEST(pool_large_blocks, blocks_sharing_a_granule_go_to_the_overflow_table_and_back) {
  // With the smallest granule (64 KiB), blocks of 256 bytes may start in one granule: the first
  // takes the entry, the others the overflow table.
  pool_large_blocks table;
  pool_chunk chunk;
  constexpr std::size_t blocks = 1000;
  for (std::size_t i = 0; i < blocks; ++i)
    table.insert(base + i * 256, {256, &chunk});
  std::size_t const granules = blocks * 256 / table.granule() + 1;
  EXPECT_EQ(table.overflowed(), blocks - granules);
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_TRUE(table.live(base + i * 256)) << i;
  EXPECT_FALSE(table.live(base + blocks * 256));
  pool_chunk* found = nullptr;
  // The granule's own entry goes first: the rest stay live, and a new block there takes the entry.
  ASSERT_EQ(table.remove(base, 256, found), pool_large_blocks::outcome::removed);
  EXPECT_FALSE(table.live(base));
  EXPECT_TRUE(table.live(base + 256));
  table.insert(base + table.granule() - 256, {256, &chunk});  // already in the overflow: replaced
  table.insert(base, {512, &chunk});
  EXPECT_EQ(table.overflowed(), blocks - granules);
  EXPECT_EQ(table.remove(base, 256, found), pool_large_blocks::outcome::wrong_size);
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_EQ(table.remove(base + i * 256, i == 0 ? 512 : 256, found),
              pool_large_blocks::outcome::removed)
        << i;
  EXPECT_EQ(table.overflowed(), 0u);
  for (std::size_t i = 0; i < blocks; ++i) {
    ASSERT_FALSE(table.live(base + i * 256)) << i;
    ASSERT_EQ(table.remove(base + i * 256, 256, found), pool_large_blocks::outcome::not_live);
  }
}

TEST(pool_large_blocks, a_second_insert_at_an_address_replaces_the_record) {
  pool_large_blocks table;
  pool_chunk a, b;
  for (std::uintptr_t at : {base, base + 256}) {  // the granule's entry, then the overflow table
    table.insert(at, {4096, &a});
    table.insert(at, {8192, &b});
  }
  EXPECT_EQ(table.overflowed(), 1u);
  for (std::uintptr_t at : {base, base + 256}) {
    pool_chunk* found = nullptr;
    EXPECT_EQ(table.remove(at, 4096, found), pool_large_blocks::outcome::wrong_size);
    EXPECT_EQ(table.remove(at, 8192, found), pool_large_blocks::outcome::removed);
    EXPECT_EQ(found, &b);
    EXPECT_FALSE(table.live(at));
    EXPECT_EQ(table.remove(at, 8192, found), pool_large_blocks::outcome::not_live);
  }
}

TEST(pool_large_blocks, regions_past_the_maps_room_are_kept_in_the_overflow_table) {
  pool_large_blocks table;
  pool_chunk chunk;
  constexpr std::size_t regions = 3 * pool_large_blocks::region_slots;
  for (std::size_t i = 0; i < regions; ++i)
    table.insert(base + i * region + 4096, {4096, &chunk});
  EXPECT_GE(table.overflowed(), regions - pool_large_blocks::region_slots);
  for (std::size_t i = 0; i < regions; ++i) {
    ASSERT_TRUE(table.live(base + i * region + 4096)) << i;
    ASSERT_FALSE(table.live(base + i * region)) << i;
  }
  pool_chunk* found = nullptr;
  for (std::size_t i = 0; i < regions; ++i)
    ASSERT_EQ(table.remove(base + i * region + 4096, 4096, found),
              pool_large_blocks::outcome::removed)
        << i;
  EXPECT_EQ(table.overflowed(), 0u);
  for (std::size_t i = 0; i < regions; ++i)
    ASSERT_FALSE(table.live(base + i * region + 4096)) << i;
}

TEST(pool_large_blocks, foreign_addresses_are_not_live_and_their_frees_change_nothing) {
  pool_large_blocks table;
  pool_chunk chunk;
  // Blocks in the lowest region (whose entries, empty, hold the keys 0 and 1) and the highest.
  std::uintptr_t const top = ~std::uintptr_t{0} - 255;
  table.insert(4096, {4096, &chunk});
  table.insert(top, {256, &chunk});
  for (std::uintptr_t foreign : {std::uintptr_t{0}, std::uintptr_t{1}, std::uintptr_t{256},
                                 std::uintptr_t{4097}, base, top - 256, ~std::uintptr_t{0}}) {
    EXPECT_FALSE(table.live(foreign)) << foreign;
    pool_chunk* found = nullptr;
    EXPECT_EQ(table.remove(foreign, 4096, found), pool_large_blocks::outcome::not_live) << foreign;
    EXPECT_EQ(found, nullptr);
  }
  pool_chunk* found = nullptr;
  EXPECT_EQ(table.remove(4096, 4096, found), pool_large_blocks::outcome::removed);
  EXPECT_EQ(table.remove(top, 256, found), pool_large_blocks::outcome::removed);
  EXPECT_FALSE(table.live(top));
}

TEST(pool_large_blocks, threads_insert_and_remove_their_own_blocks_at_once) {
  // Each thread's blocks in regions of its own, and in one region shared by all (neighbouring
  // entries, one cache line for several threads).
  pool_large_blocks table((256u << 10) + 1);
  pool_chunk chunk;
  constexpr int threads = 8;
  constexpr std::size_t per_thread = 2000;
  std::size_t const g = table.granule();
  std::vector<int> failures(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::uintptr_t const mine = base + static_cast<std::uintptr_t>(t + 1) * 16 * region;
      std::uintptr_t const shared = base + static_cast<std::uintptr_t>(t) * g;
      for (int round = 0; round < 5; ++round) {
        for (std::size_t i = 0; i < per_thread; ++i) {
          table.insert(mine + i * g, {g, &chunk});
          if (i % 100 == 0) table.insert(shared + i / 100 * threads * g, {g, &chunk});
        }
        for (std::size_t i = 0; i < per_thread; ++i) {
          pool_chunk* found = nullptr;
          failures[t] += !table.live(mine + i * g);
          failures[t] +=
              table.remove(mine + i * g, g, found) != pool_large_blocks::outcome::removed;
          if (i % 100 == 0)
            failures[t] += table.remove(shared + i / 100 * threads * g, g, found) !=
                           pool_large_blocks::outcome::removed;
        }
      }
    });
  for (auto& w : workers)
    w.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(table.overflowed(), 0u);
}

TEST(pool_large_blocks, of_threads_freeing_one_block_at_once_exactly_one_removes_it) {
  pool_large_blocks table;
  pool_chunk chunk;
  constexpr int threads = 4;
  for (int round = 0; round < 300; ++round) {
    std::uintptr_t const at = base + static_cast<std::uintptr_t>(round % 3) * 256;
    table.insert(at, {4096, &chunk});
    std::atomic<int> removed{0}, go{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        go.fetch_add(1);
        while (go.load() < threads)
          std::this_thread::yield();
        pool_chunk* found = nullptr;
        removed += table.remove(at, 4096, found) == pool_large_blocks::outcome::removed;
      });
    for (auto& w : workers)
      w.join();
    ASSERT_EQ(removed.load(), 1) << round;
    ASSERT_FALSE(table.live(at)) << round;
  }
  EXPECT_EQ(table.overflowed(), 0u);
}

TEST(pool_large_blocks, threads_sharing_granules_use_the_overflow_table_at_once) {
  // 4 KiB blocks of four threads interleaved in the same granules: the first of a granule takes its
  // entry, the others the overflow table, while another thread looks addresses up all along.
  pool_large_blocks table;
  pool_chunk chunk;
  constexpr int threads = 4, per_thread = 64;
  std::size_t const g = table.granule();
  std::vector<int> failures(threads, 0);
  std::atomic<bool> stop{false};
  std::thread spy([&] {
    for (std::uintptr_t x = 1; !stop.load(); x = x * 1103515245 + 12345)
      (void)table.live(base + (x % (1u << 20)) * 256);
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      auto const at = [&](int i) {
        return base + static_cast<std::uintptr_t>(i / 4) * g +
               static_cast<std::uintptr_t>((i % 4) * threads + t) * 4096;
      };
      for (int round = 0; round < 200; ++round) {
        for (int i = 0; i < per_thread; ++i)
          table.insert(at(i), {4096, &chunk});
        for (int i = 0; i < per_thread; ++i) {
          pool_chunk* found = nullptr;
          failures[t] += !table.live(at(i));
          failures[t] += table.remove(at(i), 8192, found) != pool_large_blocks::outcome::wrong_size;
          failures[t] += table.remove(at(i), 4096, found) != pool_large_blocks::outcome::removed;
          failures[t] += table.live(at(i));
        }
      }
    });
  for (auto& w : workers)
    w.join();
  stop.store(true);
  spy.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(table.overflowed(), 0u);
}

TEST(pool_large_blocks, a_replacement_racing_a_remove_keeps_the_overflow_count) {
  // A record replaced in the overflow table while another thread removes it: whichever comes
  // first, the count says how many records the table holds (a record it did not count would be
  // live and yet never looked up).
  pool_large_blocks table;
  pool_chunk chunk;
  std::uintptr_t const at = base + 256;  // behind base in its granule: the overflow table
  table.insert(base, {4096, &chunk});
  for (int round = 0; round < 300; ++round) {
    std::thread inserter([&] {
      for (int i = 0; i < 2000; ++i)
        table.insert(at, {4096, &chunk});  // a replacement, or a new record after a remove
    });
    std::thread remover([&] {
      for (int i = 0; i < 2000; ++i) {
        pool_chunk* found = nullptr;
        (void)table.remove(at, 4096, found);
      }
    });
    inserter.join();
    remover.join();
    // Another record in the overflow table, so that live() looks the table up even if the count
    // had lost the first: each record the table holds must be counted.
    table.insert(base + 512, {4096, &chunk});
    bool const live = table.live(at);
    ASSERT_EQ(table.overflowed(), live ? 2u : 1u) << round;
    pool_chunk* found = nullptr;
    if (live) {
      ASSERT_EQ(table.remove(at, 4096, found), pool_large_blocks::outcome::removed);
    }
    ASSERT_EQ(table.remove(base + 512, 4096, found), pool_large_blocks::outcome::removed);
    ASSERT_EQ(table.overflowed(), 0u) << round;
  }
}

}  // namespace
}  // namespace gpumem::detail
