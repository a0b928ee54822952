// The hashed table behind the map of live large blocks (src/mr/pool_block_shards.hpp, private to
// the pool, compiled into this test): records kept on a shard's own line and in its table alike, a
// double free or a wrong size refused, replacement at one address, the lock-free liveness hint
// (with a saturated counter too), and threads that insert and remove at once.
#include "pool_block_shards.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace gpumem::detail {
namespace {

constexpr std::uintptr_t base = std::uintptr_t{1} << 40;

TEST(pool_block_shards, removes_each_block_once_with_its_size) {
  pool_block_shards table;
  pool_chunk chunk;
  // Enough blocks that many shards hold several (their table), and others one (their own line).
  constexpr std::size_t blocks = 20000;
  for (std::size_t i = 0; i < blocks; ++i)
    table.insert(base + i * 256, {256 + i, &chunk});
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_TRUE(table.live(base + i * 256)) << i;
  EXPECT_FALSE(table.live(base + blocks * 256));
  for (std::size_t i = 0; i < blocks; i += 2) {
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(base + i * 256, 257 + i, found), pool_block_shards::outcome::wrong_size);
    ASSERT_EQ(table.remove(base + i * 256, 256 + i, found), pool_block_shards::outcome::removed);
    EXPECT_EQ(found, &chunk);
    ASSERT_EQ(table.remove(base + i * 256, 256 + i, found), pool_block_shards::outcome::not_live);
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_EQ(table.live(base + i * 256), i % 2 == 1) << i;
  // Inserted again (over tombstones), then all removed.
  for (std::size_t i = 0; i < blocks; i += 2)
    table.insert(base + i * 256, {1024, &chunk});
  for (std::size_t i = 0; i < blocks; ++i) {
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(base + i * 256, i % 2 == 0 ? 1024 : 256 + i, found),
              pool_block_shards::outcome::removed)
        << i;
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_FALSE(table.live(base + i * 256)) << i;
}

TEST(pool_block_shards, a_counter_that_saturates_never_hides_a_live_block) {
  // One live block more behind one counter than it can count (65535): it stays at its maximum
  // (a counter that wrapped to 0 would say that none is live), so that live() keeps looking the
  // table up for them, while some are removed and after all are.
  // Addresses a Fibonacci number of 256-byte units apart hash close together (the hash multiplies
  // by 2^64 / golden ratio): most of them share a counter, each with its own home slot.
  constexpr std::uintptr_t stride = 1836311903;
  constexpr std::size_t wanted = 65536;
  std::size_t const counter = pool_block_shards::counter_of(base);
  std::vector<std::uintptr_t> blocks;
  std::uintptr_t stranger = 0;  // behind the same counter, never inserted
  for (std::uintptr_t x = base >> 8; blocks.size() < wanted && x < (base >> 8) + 200000 * stride;
       x += stride) {
    std::uintptr_t const addr = x << 8;
    if (pool_block_shards::counter_of(addr) != counter) continue;
    if (stranger == 0 && addr != base)
      stranger = addr;
    else
      blocks.push_back(addr);
  }
  ASSERT_EQ(blocks.size(), wanted) << "the stride no longer keeps addresses on one counter";
  pool_block_shards table;
  pool_chunk chunk;
  for (std::uintptr_t addr : blocks)
    table.insert(addr, {4096, &chunk});
  for (std::uintptr_t addr : blocks)
    ASSERT_TRUE(table.live(addr)) << addr;
  EXPECT_FALSE(table.live(stranger));
  pool_chunk* found = nullptr;
  for (std::size_t i = 0; i < 200; ++i)
    ASSERT_EQ(table.remove(blocks[i], 4096, found), pool_block_shards::outcome::removed) << i;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    ASSERT_EQ(table.live(blocks[i]), i >= 200) << i;
  for (std::size_t i = 200; i < blocks.size(); ++i)
    ASSERT_EQ(table.remove(blocks[i], 4096, found), pool_block_shards::outcome::removed) << i;
  for (std::uintptr_t addr : blocks) {
    ASSERT_FALSE(table.live(addr)) << addr;
    ASSERT_EQ(table.remove(addr, 4096, found), pool_block_shards::outcome::not_live) << addr;
  }
}

TEST(pool_block_shards, a_second_insert_at_an_address_replaces_the_record) {
  pool_block_shards table;
  pool_chunk a, b;
  table.insert(base, {4096, &a});
  table.insert(base, {8192, &b});
  pool_chunk* found = nullptr;
  EXPECT_EQ(table.remove(base, 4096, found), pool_block_shards::outcome::wrong_size);
  EXPECT_EQ(table.remove(base, 8192, found), pool_block_shards::outcome::removed);
  EXPECT_EQ(found, &b);
  EXPECT_FALSE(table.live(base));
  EXPECT_EQ(table.remove(base, 8192, found), pool_block_shards::outcome::not_live);
}

TEST(pool_block_shards, threads_insert_and_remove_their_own_blocks_at_once) {
  pool_block_shards table;
  pool_chunk chunk;
  constexpr int threads = 8;
  constexpr std::size_t per_thread = 4000;
  std::vector<int> failures(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::uintptr_t const mine = base + static_cast<std::uintptr_t>(t) * (std::uintptr_t{1} << 32);
      for (int round = 0; round < 5; ++round) {
        for (std::size_t i = 0; i < per_thread; ++i)
          table.insert(mine + i * 4096, {4096, &chunk});
        for (std::size_t i = 0; i < per_thread; ++i) {
          pool_chunk* found = nullptr;
          failures[t] +=
              table.remove(mine + i * 4096, 4096, found) != pool_block_shards::outcome::removed;
        }
      }
    });
  for (auto& w : workers)
    w.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// Addresses of blocks that share shard 0 and its counter 0 with every address below 256 (whose
// hash is 0), and whose home slot in a table of 16 is slot 0 when `home_zero`: the table's hash
// (pool_block_shards.hpp) written out, so that the records below land where the test needs them.
std::vector<std::uintptr_t> blocks_beside_null(std::size_t count, bool home_zero) {
  constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ull;
  std::vector<std::uintptr_t> found;
  for (std::uint64_t k = 1; found.size() < count; ++k) {
    std::uint64_t const h = k * golden;
    if ((h >> 50) == 0 && (!home_zero || ((h >> 32) & 15) == 0))
      found.push_back(static_cast<std::uintptr_t>(k << 8));
  }
  return found;
}

// The keys 0 (no record on the shard's line) and 1 (a removed record in its table) are not
// addresses of blocks, but a foreign pointer may be either (deallocate((void*)1, n) reaches
// remove()): it is not live, and a free of it changes nothing.
void expect_no_block_at(pool_block_shards& table, std::uintptr_t key, std::size_t size) {
  EXPECT_FALSE(table.live(key));
  pool_chunk* found = nullptr;
  EXPECT_EQ(table.remove(key, size, found), pool_block_shards::outcome::not_live);
  EXPECT_EQ(found, nullptr);
}

TEST(pool_block_shards, the_empty_record_on_a_shards_line_is_not_a_block_at_address_0) {
  pool_block_shards table;
  pool_chunk chunk;
  std::vector<std::uintptr_t> const at = blocks_beside_null(2, false);
  table.insert(at[0], {4096, &chunk});  // on the shard's line
  table.insert(at[1], {8192, &chunk});  // in its table
  pool_chunk* found = nullptr;
  ASSERT_EQ(table.remove(at[0], 4096, found), pool_block_shards::outcome::removed);
  expect_no_block_at(table, 0, 4096);
  EXPECT_TRUE(table.live(at[1]));  // its counter is still 1
  EXPECT_EQ(table.remove(at[1], 8192, found), pool_block_shards::outcome::removed);
}

TEST(pool_block_shards, a_removed_record_in_a_table_is_not_a_block_at_address_1) {
  pool_block_shards table;
  pool_chunk chunk;
  std::vector<std::uintptr_t> const home = blocks_beside_null(1, true);
  std::vector<std::uintptr_t> const other = blocks_beside_null(3, false);
  std::uintptr_t const a = other[0] == home[0] ? other[2] : other[0];
  std::uintptr_t const c = other[1] == home[0] ? other[2] : other[1];
  table.insert(a, {4096, &chunk});        // on the shard's line
  table.insert(home[0], {8192, &chunk});  // its table's slot 0, where address 1's probe starts
  table.insert(c, {16384, &chunk});       // in its table too
  pool_chunk* found = nullptr;
  ASSERT_EQ(table.remove(home[0], 8192, found), pool_block_shards::outcome::removed);
  expect_no_block_at(table, 1, 8192);
  EXPECT_TRUE(table.live(a));
  EXPECT_TRUE(table.live(c));
  EXPECT_EQ(table.remove(c, 16384, found), pool_block_shards::outcome::removed);
  EXPECT_EQ(table.remove(a, 4096, found), pool_block_shards::outcome::removed);
}

}  // namespace
}  // namespace gpumem::detail
