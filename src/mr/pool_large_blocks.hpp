// The live large blocks of pool_resource (private to src/mr/pool_*.cpp): blocks above
// max_cached_size, by address, with their size and chunk. A free finds its block's chunk here
// without the pool's locks, and a free of a block that is not live (freed twice, on any stream, or
// never allocated here) or with the wrong size is caught instead of corrupting the pool.
//
// Sharded by 16 MiB region of the address, 4096 shards (a stream's blocks come from its own slabs,
// at least a growth step each, so threads on separate streams rarely meet in a shard), each shard
// an open-addressing table (linear probing, tombstones) under its own lock: no allocation per
// block, one probe or two per operation. With 256 shards of 64 MiB regions, 16 threads on 1-64 MiB
// blocks met there often enough to cost each thread a third of its time (host backend on a 16-core
// host, three runs: 459-527 ns per pair and thread at 16 threads, 323-339 with 4096 shards of
// 16 MiB; 210-298 alone). Thread safe.
//
// A free of a cached size (max_cached_size or less) goes to a thread's stack without the table; so
// that such a free of a live large block (a wrong size) is still caught, the table also keeps a
// count of its live blocks per hash of their address (16384 counters, read without a lock): a
// cached-size free looks the table up only when its address's count is not 0.
#pragma once

#include "pool_extents.hpp"
#include "pool_lock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gpumem::detail {

class pool_large_blocks {
 public:
  struct block {
    std::size_t size;
    pool_chunk* chunk;
  };
  enum class outcome { removed, not_live, wrong_size };

  pool_large_blocks();
  ~pool_large_blocks();
  pool_large_blocks(pool_large_blocks const&) = delete;
  pool_large_blocks& operator=(pool_large_blocks const&) = delete;

  // Records a live block (replacing a record at the same address). May throw std::bad_alloc when
  // its shard's table grows; then nothing changed.
  void insert(std::uintptr_t addr, block b);
  // Removes the block at `addr` if it is live with `size` bytes, and says which chunk holds it.
  outcome remove(std::uintptr_t addr, std::size_t size, pool_chunk*& chunk) noexcept;
  // True if a live block starts at `addr`. Inline and cheap when none may: one counter read, no
  // lock (the block's allocation, and its count, happened before the caller could name it).
  bool live(std::uintptr_t addr) noexcept {
    return live_counter(addr).load(std::memory_order_relaxed) != 0 && look_up(addr);
  }

 private:
  struct slot {
    std::uintptr_t key;  // 0: empty, 1: removed (blocks are 256-byte aligned, never 0 or 1)
    block value;
  };
  struct alignas(64) shard {
    pool_lock mutex;
    std::unique_ptr<slot[]> slots;
    std::size_t capacity = 0;  // a power of two
    std::size_t used = 0;      // live records
    std::size_t removed = 0;   // tombstones
  };
  static constexpr std::size_t shard_count = 4096;
  static constexpr std::size_t live_counters = 16384;
  static constexpr std::uintptr_t empty = 0, tombstone = 1;

  shard& shard_of(std::uintptr_t addr) noexcept;
  static std::size_t home(std::uintptr_t addr, std::size_t capacity) noexcept;
  // Rebuilds `s`'s table with room for one more record (strong guarantee).
  static void rebuild(shard& s);

  static constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ull;
  std::atomic<std::uint32_t>& live_counter(std::uintptr_t addr) noexcept {
    static_assert(live_counters == 16384, "the shift below takes 14 bits");
    return live_[((addr >> 8) * golden) >> 50];
  }
  bool look_up(std::uintptr_t addr) noexcept;  // under the shard's lock

  std::unique_ptr<shard[]> shards_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> live_;  // live blocks per hash of the address
};

}  // namespace gpumem::detail
