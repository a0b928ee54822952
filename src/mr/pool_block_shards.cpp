// The hashed table of live large blocks behind pool_large_blocks (see pool_block_shards.hpp).
#include "pool_block_shards.hpp"

#include <limits>
#include <new>

namespace gpumem::detail {

pool_block_shards::pool_block_shards() : shards_(std::make_unique<shard[]>(shard_count)) {}

pool_block_shards::~pool_block_shards() = default;

void pool_block_shards::rebuild(shard& s) {
  // Grow when live records fill a quarter; otherwise the same size, without the tombstones.
  std::size_t const now = s.capacity;
  std::size_t const capacity =
      now == 0 ? 16 : ((std::size_t{s.used} + 1) * 4 > now ? now * 2 : now);
  if (capacity > std::numeric_limits<std::uint32_t>::max()) throw std::bad_alloc();
  auto slots = std::make_unique<slot[]>(capacity);  // may throw: nothing changed yet
  for (std::size_t i = 0; i < capacity; ++i)
    slots[i].key = empty;
  for (std::size_t i = 0; i < s.capacity; ++i) {
    slot const& old = s.slots[i];
    if (old.key == empty || old.key == tombstone) continue;
    std::size_t at = home(hash(old.key), capacity);
    while (slots[at].key != empty)
      at = (at + 1) & (capacity - 1);
    slots[at] = old;
  }
  s.slots = std::move(slots);
  s.capacity = static_cast<std::uint32_t>(capacity);
  s.removed = 0;
}

pool_block_shards::slot* pool_block_shards::find(shard& s, std::uint64_t h,
                                                 std::uintptr_t addr) noexcept {
  if (s.used == 0) return nullptr;
  std::size_t const mask = s.capacity - 1;
  for (std::size_t at = home(h, s.capacity);; at = (at + 1) & mask) {
    slot& candidate = s.slots[at];
    if (candidate.key == addr) return &candidate;
    if (candidate.key == empty) return nullptr;
  }
}

bool pool_block_shards::insert(std::uintptr_t addr, block b) {
  std::uint64_t const h = hash(addr);
  shard& s = shards_[shard_index(h)];
  std::lock_guard<pool_lock> lock(s.mutex);
  if (s.first.key == addr) {
    s.first.value = b;
    return false;
  }
  if (slot* const known = find(s, h, addr)) {
    known->value = b;
    return false;
  }
  if (s.first.key == empty) {
    s.first = {addr, b};
    count(s, h, +1);
    return true;
  }
  // At most half the slots in use (live or removed): probes stay short.
  if ((std::size_t{s.used} + s.removed + 1) * 2 > s.capacity) rebuild(s);
  std::size_t const mask = s.capacity - 1;
  std::size_t at = home(h, s.capacity);
  while (s.slots[at].key != empty && s.slots[at].key != tombstone)
    at = (at + 1) & mask;
  if (s.slots[at].key == tombstone) --s.removed;
  s.slots[at] = {addr, b};
  ++s.used;
  count(s, h, +1);
  return true;
}

pool_block_shards::outcome pool_block_shards::remove(std::uintptr_t addr, std::size_t size,
                                                     pool_chunk*& chunk) noexcept {
  // The keys empty and removed are no block's address, but a foreign pointer may be either: it
  // would match the empty record on the shard's line or a tombstone, with its stale size.
  if (addr <= tombstone) return outcome::not_live;
  std::uint64_t const h = hash(addr);
  shard& s = shards_[shard_index(h)];
  std::lock_guard<pool_lock> lock(s.mutex);
  slot* const found = s.first.key == addr ? &s.first : find(s, h, addr);
  if (found == nullptr) return outcome::not_live;
  if (found->value.size != size) return outcome::wrong_size;
  chunk = found->value.chunk;
  if (found == &s.first) {
    s.first.key = empty;
  } else {
    found->key = tombstone;
    --s.used;
    ++s.removed;
  }
  count(s, h, -1);
  return outcome::removed;
}

bool pool_block_shards::look_up(std::uintptr_t addr) noexcept {
  if (addr <= tombstone) return false;  // as in remove()
  std::uint64_t const h = hash(addr);
  shard& s = shards_[shard_index(h)];
  std::lock_guard<pool_lock> lock(s.mutex);
  return s.first.key == addr || find(s, h, addr) != nullptr;
}

}  // namespace gpumem::detail
