// The table of live large blocks (src/mr/pool_large_blocks.hpp, private to the pool, compiled into
// this test): records kept on a shard's own line and in its table alike, a double free or a wrong
// size refused, replacement at one address, the lock-free liveness hint, and threads that insert
// and remove at once.
#include "pool_large_blocks.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace gpumem::detail {
namespace {

constexpr std::uintptr_t base = std::uintptr_t{1} << 40;

TEST(pool_large_blocks, removes_each_block_once_with_its_size) {
  pool_large_blocks table;
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
    ASSERT_EQ(table.remove(base + i * 256, 257 + i, found), pool_large_blocks::outcome::wrong_size);
    ASSERT_EQ(table.remove(base + i * 256, 256 + i, found), pool_large_blocks::outcome::removed);
    EXPECT_EQ(found, &chunk);
    ASSERT_EQ(table.remove(base + i * 256, 256 + i, found), pool_large_blocks::outcome::not_live);
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_EQ(table.live(base + i * 256), i % 2 == 1) << i;
  // Inserted again (over tombstones), then all removed.
  for (std::size_t i = 0; i < blocks; i += 2)
    table.insert(base + i * 256, {1024, &chunk});
  for (std::size_t i = 0; i < blocks; ++i) {
    pool_chunk* found = nullptr;
    ASSERT_EQ(table.remove(base + i * 256, i % 2 == 0 ? 1024 : 256 + i, found),
              pool_large_blocks::outcome::removed)
        << i;
  }
  for (std::size_t i = 0; i < blocks; ++i)
    ASSERT_FALSE(table.live(base + i * 256)) << i;
}

TEST(pool_large_blocks, a_second_insert_at_an_address_replaces_the_record) {
  pool_large_blocks table;
  pool_chunk a, b;
  table.insert(base, {4096, &a});
  table.insert(base, {8192, &b});
  pool_chunk* found = nullptr;
  EXPECT_EQ(table.remove(base, 4096, found), pool_large_blocks::outcome::wrong_size);
  EXPECT_EQ(table.remove(base, 8192, found), pool_large_blocks::outcome::removed);
  EXPECT_EQ(found, &b);
  EXPECT_FALSE(table.live(base));
  EXPECT_EQ(table.remove(base, 8192, found), pool_large_blocks::outcome::not_live);
}

TEST(pool_large_blocks, threads_insert_and_remove_their_own_blocks_at_once) {
  pool_large_blocks table;
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
              table.remove(mine + i * 4096, 4096, found) != pool_large_blocks::outcome::removed;
        }
      }
    });
  for (auto& w : workers)
    w.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace gpumem::detail
