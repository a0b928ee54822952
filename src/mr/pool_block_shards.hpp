// The overflow of pool_large_blocks (private to src/mr/pool_*.cpp): live large blocks by address,
// with their size and chunk, in a hashed table of shards. pool_large_blocks keeps a block here only
// when its own map cannot (a second block starting in one granule, or an address region past the
// map's room), so that with the default options this table is never built.
//
// 4096 shards, each under its own lock, with one record on the shard's own cache line and an open-
// addressing table (linear probing, tombstones) for the others: no allocation per block, and with
// fewer live blocks than shards mostly no cache line touched but the shard's (a table probe is one
// line more). A block's shard is picked by a hash of its address.
//
// So that a free of a cached size at the address of a live large block (a wrong size) is caught
// without the lock, each shard also keeps a count of its live blocks per hash of their address
// (four counters per shard, 16384 in all, read without a lock): live() looks the table up only
// when its address's count is not 0. A counter that reaches its maximum (65535 live blocks behind
// one counter) stays there: frees of its addresses then always look the table up, which is slower
// but never wrong. The counters share the shard's cache line and lock.
#pragma once

#include "pool_extents.hpp"
#include "pool_lock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>

namespace gpumem::detail {

class pool_block_shards {
 public:
  struct block {
    std::size_t size;
    pool_chunk* chunk;
  };
  enum class outcome { removed, not_live, wrong_size };

  pool_block_shards();
  ~pool_block_shards();
  pool_block_shards(pool_block_shards const&) = delete;
  pool_block_shards& operator=(pool_block_shards const&) = delete;

  // Records a live block (replacing a record at the same address). May throw std::bad_alloc when
  // its shard's table grows; then nothing changed.
  // True if the record is new (false: it replaced one).
  bool insert(std::uintptr_t addr, block b);
  // Removes the block at `addr` if it is live with `size` bytes, and says which chunk holds it.
  outcome remove(std::uintptr_t addr, std::size_t size, pool_chunk*& chunk) noexcept;
  // True if a live block starts at `addr`. Inline and cheap when none may: one counter read, no
  // lock (the block's allocation, and its count, happened before the caller could name it).
  bool live(std::uintptr_t addr) noexcept {
    std::uint64_t const h = hash(addr);
    return shards_[shard_index(h)].live[counter_index(h)].load(std::memory_order_relaxed) != 0 &&
           look_up(addr);
  }
  // Which of the 16384 live counters a block at `addr` counts in (shard × 4 + counter): for tests
  // that need many blocks behind one counter.
  static std::size_t counter_of(std::uintptr_t addr) noexcept {
    std::uint64_t const h = hash(addr);
    return shard_index(h) * counters_per_shard + counter_index(h);
  }

 private:
  struct slot {
    // 0: empty, 1: removed (blocks are 256-byte aligned, never 0 or 1; remove() and look_up()
    // refuse those two addresses, which a foreign pointer may be, before they meet a key)
    std::uintptr_t key;
    block value;
  };
  static constexpr std::size_t counters_per_shard = 4;
  struct alignas(64) shard {
    pool_lock mutex;
    // Live blocks per counter_index of their address's hash: changed under `mutex`, read without.
    std::atomic<std::uint16_t> live[counters_per_shard] = {};
    slot first{empty, {}};  // a record outside the table (key empty when there is none)
    std::unique_ptr<slot[]> slots;
    std::uint32_t capacity = 0;  // a power of two
    std::uint32_t used = 0;      // live records in the table
    std::uint32_t removed = 0;   // tombstones
  };
  static_assert(sizeof(shard) == 64, "a shard is one cache line");
  static constexpr std::size_t shard_count = 4096;
  static constexpr std::uintptr_t empty = 0, tombstone = 1;

  // One hash of the address picks the shard (its top 12 bits), the counter within it (the next
  // 2) and the home slot (bits from 32 up).
  static constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ull;
  static std::uint64_t hash(std::uintptr_t addr) noexcept { return (addr >> 8) * golden; }
  static std::size_t shard_index(std::uint64_t h) noexcept {
    static_assert(shard_count == 4096, "the shift below takes 12 bits");
    return static_cast<std::size_t>(h >> 52);
  }
  static std::size_t counter_index(std::uint64_t h) noexcept {
    static_assert(counters_per_shard == 4, "the mask below takes 2 bits");
    return static_cast<std::size_t>(h >> 50) & 3;
  }
  static std::size_t home(std::uint64_t h, std::size_t capacity) noexcept {
    return static_cast<std::size_t>(h >> 32) & (capacity - 1);
  }
  // Under the shard's lock: a plain load and store, as nothing else changes it. Saturates (see the
  // file comment).
  static void count(shard& s, std::uint64_t h, int delta) noexcept {
    std::atomic<std::uint16_t>& c = s.live[counter_index(h)];
    std::uint16_t const now = c.load(std::memory_order_relaxed);
    if (now == std::numeric_limits<std::uint16_t>::max()) return;
    c.store(static_cast<std::uint16_t>(now + delta), std::memory_order_relaxed);
  }
  // Rebuilds `s`'s table with room for one more record (strong guarantee).
  static void rebuild(shard& s);
  // The table's slot holding `addr` (null if none), under the shard's lock.
  static slot* find(shard& s, std::uint64_t h, std::uintptr_t addr) noexcept;
  bool look_up(std::uintptr_t addr) noexcept;  // takes the shard's lock

  std::unique_ptr<shard[]> shards_;
};

}  // namespace gpumem::detail
