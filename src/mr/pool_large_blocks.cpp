// The live large blocks of pool_resource (see pool_large_blocks.hpp).
#include "pool_large_blocks.hpp"

#include <algorithm>

namespace gpumem::detail {

pool_large_blocks::pool_large_blocks()
    : shards_(std::make_unique<shard[]>(shard_count)),
      live_(std::make_unique<std::atomic<std::uint32_t>[]>(live_counters)) {
  for (std::size_t i = 0; i < live_counters; ++i)
    live_[i].store(0, std::memory_order_relaxed);
}

pool_large_blocks::~pool_large_blocks() = default;

pool_large_blocks::shard& pool_large_blocks::shard_of(std::uintptr_t addr) noexcept {
  static_assert(shard_count == 4096, "the shift below takes 12 bits");
  return shards_[((addr >> 24) * golden) >> 52];
}

std::size_t pool_large_blocks::home(std::uintptr_t addr, std::size_t capacity) noexcept {
  return static_cast<std::size_t>(((addr >> 8) * golden) >> 32) & (capacity - 1);
}

void pool_large_blocks::rebuild(shard& s) {
  // Grow when live records fill a quarter; otherwise the same size, without the tombstones.
  std::size_t const capacity =
      s.capacity == 0 ? 16 : ((s.used + 1) * 4 > s.capacity ? s.capacity * 2 : s.capacity);
  auto slots = std::make_unique<slot[]>(capacity);  // may throw: nothing changed yet
  for (std::size_t i = 0; i < capacity; ++i)
    slots[i].key = empty;
  for (std::size_t i = 0; i < s.capacity; ++i) {
    slot const& old = s.slots[i];
    if (old.key == empty || old.key == tombstone) continue;
    std::size_t at = home(old.key, capacity);
    while (slots[at].key != empty)
      at = (at + 1) & (capacity - 1);
    slots[at] = old;
  }
  s.slots = std::move(slots);
  s.capacity = capacity;
  s.removed = 0;
}

void pool_large_blocks::insert(std::uintptr_t addr, block b) {
  shard& s = shard_of(addr);
  std::lock_guard<pool_lock> lock(s.mutex);
  // At most half the slots in use (live or removed): probes stay short.
  if ((s.used + s.removed + 1) * 2 > s.capacity) rebuild(s);
  std::size_t at = home(addr, s.capacity);
  std::size_t reuse = s.capacity;  // the first tombstone on the way
  for (;; at = (at + 1) & (s.capacity - 1)) {
    slot& candidate = s.slots[at];
    if (candidate.key == addr) {
      candidate.value = b;
      return;
    }
    if (candidate.key == tombstone && reuse == s.capacity) reuse = at;
    if (candidate.key == empty) break;
  }
  if (reuse != s.capacity) {
    at = reuse;
    --s.removed;
  }
  s.slots[at] = {addr, b};
  ++s.used;
  live_counter(addr).fetch_add(1, std::memory_order_relaxed);
}

pool_large_blocks::outcome pool_large_blocks::remove(std::uintptr_t addr, std::size_t size,
                                                     pool_chunk*& chunk) noexcept {
  shard& s = shard_of(addr);
  std::lock_guard<pool_lock> lock(s.mutex);
  if (s.capacity == 0) return outcome::not_live;
  for (std::size_t at = home(addr, s.capacity);; at = (at + 1) & (s.capacity - 1)) {
    slot& candidate = s.slots[at];
    if (candidate.key == empty) return outcome::not_live;
    if (candidate.key != addr) continue;
    if (candidate.value.size != size) return outcome::wrong_size;
    chunk = candidate.value.chunk;
    candidate.key = tombstone;
    --s.used;
    ++s.removed;
    live_counter(addr).fetch_sub(1, std::memory_order_relaxed);
    return outcome::removed;
  }
}

bool pool_large_blocks::look_up(std::uintptr_t addr) noexcept {
  shard& s = shard_of(addr);
  std::lock_guard<pool_lock> lock(s.mutex);
  if (s.capacity == 0) return false;
  for (std::size_t at = home(addr, s.capacity);; at = (at + 1) & (s.capacity - 1)) {
    std::uintptr_t const key = s.slots[at].key;
    if (key == empty) return false;
    if (key == addr) return true;
  }
}

}  // namespace gpumem::detail
