// The live large blocks of pool_resource (private to src/mr/pool_*.cpp): blocks above
// max_cached_size, by address, with their size and chunk. A free finds its block's chunk here
// without the pool's locks, and a free of a block that is not live (freed twice, on any stream, or
// never allocated here) or with the wrong size is caught instead of corrupting the pool; so is a
// free of a cached size at the address of a live large block, or less than a granule past it
// (holds(), on every cached-size free).
//
// A map by address, as an allocator's page map: the address space is cut into regions of 256 MiB,
// and a region, once a block starts in it, into granules of one entry each, which holds the block
// that starts in that granule. The granule is the largest power of two no larger than the smallest
// large block (256 KiB with the default max_cached_size, and at least 64 KiB), so that two live
// large blocks never start in one granule: an entry is exact, and live() is one load and a compare,
// with no false positive.
//
// Why a map by address: the threads of separate streams carve their blocks from separate extents,
// so each thread's entries lie on cache lines that other threads seldom touch (an entry line
// covers about 680 KiB of addresses), and one thread's entries are few lines. A hash of the address
// spread every thread's blocks over all the lines of a table instead: on an H200's host, 16
// threads on the mixed trace spent about 40 % of their time on lines of a 4096-shard hashed table
// that other cores had just written (the live-block counters of cached-size frees, and the shard
// records of large allocations and frees).
//
// An entry's key is its lock: 0 empty, 1 busy (being written or removed, for a few instructions;
// others spin), else the address of the block. A region's entries are allocated when a block first
// starts in it and kept until the table goes; regions are found through a small open-addressing
// table, read without a lock and written under grow_mutex_.
//
// What the map cannot hold goes to pool_block_shards, built on first use: a second block starting
// in a granule (possible only with max_cached_size below 64 KiB) and the blocks of regions past the
// map's room (1024 regions, 256 GiB of addresses in all, at most region_probes slots from a
// region's hash).
#pragma once

#include "pool_block_shards.hpp"
#include "pool_extents.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gpumem::detail {

class pool_large_blocks {
 public:
  using block = pool_block_shards::block;
  using outcome = pool_block_shards::outcome;

  // `smallest_block`: the size of the smallest large block the pool hands out (it sets the
  // granule; 0 for the smallest granule).
  explicit pool_large_blocks(std::size_t smallest_block = 0) noexcept;
  ~pool_large_blocks();
  pool_large_blocks(pool_large_blocks const&) = delete;
  pool_large_blocks& operator=(pool_large_blocks const&) = delete;

  // Records a live block (replacing a record at the same address). `addr` is a block's address:
  // neither 0 nor 1 (the keys of an empty and a busy entry). May throw std::bad_alloc (a region's
  // entries, or the overflow table); then nothing changed.
  void insert(std::uintptr_t addr, block b);
  // Removes the block at `addr` if it is live with `size` bytes, and says which chunk holds it.
  outcome remove(std::uintptr_t addr, std::size_t size, pool_chunk*& chunk) noexcept;
  // True if a live block starts at `addr`. Inline, no lock: the region table's line and the entry's
  // (the block's allocation happened before the caller could name it).
  bool live(std::uintptr_t addr) noexcept {
    if (addr <= busy) return false;  // as in remove()
    if (entry* const e = entry_of(addr); e != nullptr && settled_key(*e) == addr) return true;
    return overflow_count_.load(std::memory_order_acquire) != 0 && overflow_live(addr);
  }

  // True if a live block starts at `addr` or holds it, among the blocks that start in addr's
  // granule or the one before: a cached-size free of a pointer less than a granule past the start
  // of a live large block (an offset into a buffer, freed by mistake) is caught at the cost of two
  // entries' loads; one deeper inside may not be. A size is read between two loads of its key: a
  // size of another block at that key (freed and allocated again meanwhile) is still a live
  // block's.
  bool holds(std::uintptr_t addr) noexcept {
    if (addr <= busy) return false;
    entry* const e = entry_of(addr);
    if (e != nullptr) {
      std::uintptr_t const key = settled_key(*e);
      if (key == addr) return true;
      if (key != empty && key < addr && holds_from(*e, key, addr)) return true;
    }
    // The granule before: the entry before `e` in the same region (a region without entries has
    // none before either), else, for a region's first granule, the previous region's last.
    bool const first_of_region = ((addr & (region_size - 1)) >> granule_shift_) == 0;
    entry* const before = !first_of_region    ? (e != nullptr ? e - 1 : nullptr)
                          : addr >= granule() ? entry_of(addr - granule())
                                              : nullptr;
    if (before != nullptr) {
      std::uintptr_t const key = settled_key(*before);
      if (key != empty && holds_from(*before, key, addr)) return true;
    }
    return overflow_count_.load(std::memory_order_acquire) != 0 && overflow_live(addr);
  }

  std::size_t granule() const noexcept { return std::size_t{1} << granule_shift_; }
  // The blocks kept in the overflow table now (for tests).
  std::size_t overflowed() const noexcept {
    return overflow_count_.load(std::memory_order_relaxed);
  }

  static constexpr unsigned region_shift = 28;
  static constexpr std::uintptr_t region_size = std::uintptr_t{1} << region_shift;
  static constexpr std::size_t region_slots = 1024;
  static constexpr std::size_t region_probes = 16;

 private:
  static constexpr std::uintptr_t empty = 0, busy = 1;
  struct entry {
    std::atomic<std::uintptr_t> key{empty};
    std::atomic<std::size_t> size{0};
    std::atomic<pool_chunk*> chunk{nullptr};
  };
  struct region {
    std::atomic<std::uintptr_t> id{0};  // (address >> region_shift) + 1; 0: a free slot
    std::atomic<entry*> entries{nullptr};
  };

  static std::uintptr_t region_id(std::uintptr_t addr) noexcept {
    return (addr >> region_shift) + 1;
  }
  static std::size_t region_home(std::uintptr_t id) noexcept {
    static_assert(region_slots == 1024, "the shift below takes 10 bits");
    return static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ull) >> 54);
  }
  // The entry of the granule holding `addr`, if its region has entries (else null; then
  // `*no_room`, if given, says whether the region's slots are all taken by other regions, so that
  // it never will have entries).
  entry* entry_of(std::uintptr_t addr, bool* no_room = nullptr) noexcept {
    std::uintptr_t const id = region_id(addr);
    std::size_t at = region_home(id);
    for (std::size_t i = 0; i < region_probes; ++i, at = (at + 1) & (region_slots - 1)) {
      std::uintptr_t const seen = regions_[at].id.load(std::memory_order_acquire);
      if (seen == id)
        return regions_[at].entries.load(std::memory_order_relaxed) +
               ((addr & (region_size - 1)) >> granule_shift_);
      if (seen == 0) return nullptr;
    }
    if (no_room != nullptr) *no_room = true;
    return nullptr;
  }
  // The entry's key once no thread is writing or removing it.
  static std::uintptr_t settled_key(entry& e) noexcept {
    std::uintptr_t key = e.key.load(std::memory_order_acquire);
    for (unsigned spins = 0; key == busy; ++spins) {
      relax(spins);
      key = e.key.load(std::memory_order_acquire);
    }
    return key;
  }
  static void relax(unsigned spins) noexcept;
  // True if the block `e` held at `key` (below addr) reaches past `addr`.
  static bool holds_from(entry& e, std::uintptr_t key, std::uintptr_t addr) noexcept {
    std::size_t const size = e.size.load(std::memory_order_relaxed);
    return e.key.load(std::memory_order_acquire) == key && addr - key < size;
  }
  // Gives `addr`'s region entries (under grow_mutex_); null when the region table has no room.
  // May throw std::bad_alloc.
  entry* map_region(std::uintptr_t addr);
  void insert_overflow(std::uintptr_t addr, block b);
  bool overflow_live(std::uintptr_t addr) noexcept;

  unsigned granule_shift_;
  region regions_[region_slots];
  // Read by every live() that finds no block in the map: changed only with the overflow table.
  std::atomic<std::size_t> overflow_count_{0};
  std::atomic<pool_block_shards*> overflow_{nullptr};  // owned; set once, under grow_mutex_
  alignas(64) std::mutex grow_mutex_;                  // off the line of overflow_count_
};

}  // namespace gpumem::detail
