// The live large blocks of pool_resource (see pool_large_blocks.hpp).
#include "pool_large_blocks.hpp"

#include <gpumem/core/assert.hpp>

#include <algorithm>
#include <new>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gpumem::detail {

namespace {

constexpr unsigned smallest_granule_shift = 16;  // 64 KiB

unsigned granule_shift_for(std::size_t smallest_block) noexcept {
  unsigned shift = smallest_granule_shift;
  while (shift < pool_large_blocks::region_shift && (std::size_t{2} << shift) <= smallest_block)
    ++shift;
  return shift;
}

}  // namespace

pool_large_blocks::pool_large_blocks(std::size_t smallest_block) noexcept
    : granule_shift_(granule_shift_for(smallest_block)) {}

pool_large_blocks::~pool_large_blocks() {
  for (region& r : regions_)
    delete[] r.entries.load(std::memory_order_relaxed);
  delete overflow_.load(std::memory_order_relaxed);
}

void pool_large_blocks::relax(unsigned spins) noexcept {
  // A busy entry is held for a few instructions: spin, and yield to a holder that lost its core.
  if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

pool_large_blocks::entry* pool_large_blocks::map_region(std::uintptr_t addr) {
  std::lock_guard<std::mutex> lock(grow_mutex_);
  std::uintptr_t const id = region_id(addr);
  std::size_t at = region_home(id);
  for (std::size_t i = 0; i < region_probes; ++i, at = (at + 1) & (region_slots - 1)) {
    region& r = regions_[at];
    std::uintptr_t const seen = r.id.load(std::memory_order_relaxed);
    if (seen != id && seen != 0) continue;
    if (seen == 0) {
      std::size_t const entries = std::size_t{1} << (region_shift - granule_shift_);
      r.entries.store(new entry[entries], std::memory_order_relaxed);  // may throw: nothing changed
      r.id.store(id, std::memory_order_release);                       // publishes the entries
    }
    return r.entries.load(std::memory_order_relaxed) +
           ((addr & (region_size - 1)) >> granule_shift_);
  }
  return nullptr;  // no room near the region's home: its blocks go to the overflow table
}

void pool_large_blocks::insert(std::uintptr_t addr, block b) {
  if (addr <= busy) {  // no block's address (the pool's blocks are 256-byte aligned, never null)
    GPUMEM_ASSERT(false, "pool_large_blocks::insert: address 0 or 1");
    return;
  }
  // A record at the same address in the overflow table is replaced there.
  if (overflow_count_.load(std::memory_order_acquire) != 0 && overflow_live(addr)) {
    insert_overflow(addr, b);
    return;
  }
  bool no_room = false;
  entry* e = entry_of(addr, &no_room);
  if (e == nullptr && !no_room) e = map_region(addr);
  if (e != nullptr) {
    for (unsigned spins = 0;; ++spins) {
      std::uintptr_t key = e->key.load(std::memory_order_relaxed);
      if (key == busy) {
        relax(spins);
        continue;
      }
      if (key != empty && key != addr) break;  // another block starts in this granule
      if (!e->key.compare_exchange_weak(key, busy, std::memory_order_acquire,
                                        std::memory_order_relaxed))
        continue;
      e->size.store(b.size, std::memory_order_relaxed);
      e->chunk.store(b.chunk, std::memory_order_relaxed);
      e->key.store(addr, std::memory_order_release);
      return;
    }
  }
  insert_overflow(addr, b);
}

void pool_large_blocks::insert_overflow(std::uintptr_t addr, block b) {
  pool_block_shards* table = overflow_.load(std::memory_order_acquire);
  if (table == nullptr) {
    std::lock_guard<std::mutex> lock(grow_mutex_);
    table = overflow_.load(std::memory_order_relaxed);
    if (table == nullptr) {
      table = new pool_block_shards();  // may throw: nothing changed
      overflow_.store(table, std::memory_order_release);
    }
  }
  // May throw: nothing changed. A record that replaces one (at an address live there) is not
  // counted again.
  if (table->insert(addr, b)) overflow_count_.fetch_add(1, std::memory_order_release);
}

bool pool_large_blocks::overflow_live(std::uintptr_t addr) noexcept {
  return overflow_.load(std::memory_order_acquire)->live(addr);
}

pool_large_blocks::outcome pool_large_blocks::remove(std::uintptr_t addr, std::size_t size,
                                                     pool_chunk*& chunk) noexcept {
  // The keys empty and busy are no block's address, but a foreign pointer may be either.
  if (addr <= busy) return outcome::not_live;
  if (entry* const e = entry_of(addr)) {
    for (unsigned spins = 0;; ++spins) {
      std::uintptr_t key = e->key.load(std::memory_order_relaxed);
      if (key == busy) {
        relax(spins);
        continue;
      }
      if (key != addr) break;
      if (!e->key.compare_exchange_weak(key, busy, std::memory_order_acquire,
                                        std::memory_order_relaxed))
        continue;
      if (e->size.load(std::memory_order_relaxed) != size) {
        e->key.store(addr, std::memory_order_release);
        return outcome::wrong_size;
      }
      chunk = e->chunk.load(std::memory_order_relaxed);
      e->key.store(empty, std::memory_order_release);
      return outcome::removed;
    }
  }
  if (overflow_count_.load(std::memory_order_acquire) == 0) return outcome::not_live;
  outcome const found = overflow_.load(std::memory_order_relaxed)->remove(addr, size, chunk);
  if (found == outcome::removed) overflow_count_.fetch_sub(1, std::memory_order_relaxed);
  return found;
}

}  // namespace gpumem::detail
