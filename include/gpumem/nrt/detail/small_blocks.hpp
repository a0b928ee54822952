// gpumem/nrt/detail/small_blocks.hpp
//
// The device heap's small blocks (the size classes, up to max_small_block; nrt/detail/slab_heap.hpp
// describes the algorithm): the slot words, the warp-aggregated reservation of blocks, slab
// acquisition and retirement, and the free path (the block's bit, the slab's remaining count).
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/warp.hpp>
#include <gpumem/nrt/detail/heap_ref.hpp>
#include <gpumem/nrt/detail/slab_bitmap.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::nrt::detail {

// Claims one free slab for class `cls` and prepares it: `remaining` = capacity + 1, the class in
// slab_info, every block's bit set. No_slab when none is free.
GPUMEM_HD inline std::uint32_t acquire_slab(heap_ref const& h, unsigned cls, std::uint32_t shard) {
  std::uint32_t const s = claim_slab(h, shard);
  if (s == no_slab) return s;
  std::uint32_t const cap = class_capacity(h, cls);
  // Published to other threads by the release store/CAS of the slot that names s.
  atomic_store(&h.remaining[s], cap + 1, mem_order::relaxed);
  atomic_store(&h.slab_info[s], static_cast<std::uint32_t>(cls), mem_order::relaxed);
  // cap / 64 stores (128 for 16-byte blocks in a 128 KiB slab): one per 64 blocks handed out.
  unsigned long long* const bits = h.block_bits + s * block_words(h.slab_shift);
  for (std::uint32_t i = 0; i < cap / 64u; ++i)
    atomic_store(&bits[i], ~0ull, mem_order::relaxed);
  if (cap % 64u != 0) atomic_store(&bits[cap / 64u], (1ull << (cap % 64u)) - 1, mem_order::relaxed);
  return s;
}

// Drops `k` of a small slab's remaining count; the last one releases it.
GPUMEM_HD inline void drop_slab_refs(heap_ref const& h, std::uint32_t s, std::uint32_t k) {
  if (atomic_fetch_sub(&h.remaining[s], k, mem_order::acq_rel) == k) release_slabs(h, s, 1);
}

// The slot word: slab index in the high half, bump in the low half; or no_slab in the high half and
// one of two states with no slab: empty (initially, after trim(), after a retirement that found the
// heap full) and installing (one group is acquiring a slab for it; the others wait rather than each
// taking a slab, which on a small heap would make some of them fail while slabs are merely in
// flight).
//
// Late additions. A leader reads the word and then adds to it (one fetch_add, no CAS: the fast
// path), so a leader delayed between the two adds to whatever the word holds by then. On a slab
// word that is harmless: the old value it gets names the slab it reserved from, and a bump past the
// capacity means "retry". A no-slab state must absorb such additions too, so each state is a range:
// its low half starts at 2^31 (empty) or 2^31 + 2^30 (installing), and the additions that can pile
// up on it (one per leader that read a slab word just before the slot lost it, at most 32 lanes
// each: far fewer than 2^30) leave the slab half no_slab and the state what it was. A state is left
// by rewriting the whole word (the CAS to installing, the store of a fresh slab or of empty), which
// drops them. (Were empty ~0, one late addition of 1 would wrap it to {slab 0, bump 0} and hand out
// slab 0's blocks a second time.)
GPUMEM_HD constexpr unsigned long long slot_word(std::uint32_t slab, std::uint32_t bump) {
  return (static_cast<unsigned long long>(slab) << 32) | bump;
}
inline constexpr unsigned long long slot_empty = slot_word(no_slab, 0x80000000u);
inline constexpr unsigned long long slot_installing = slot_word(no_slab, 0xC0000000u);
GPUMEM_HD constexpr bool slot_holds_slab(unsigned long long w) {
  return static_cast<std::uint32_t>(w >> 32) != no_slab;
}
GPUMEM_HD constexpr bool slot_is_installing(unsigned long long w) {
  return !slot_holds_slab(w) && (static_cast<std::uint32_t>(w) & 0x40000000u) != 0;
}
// Leader results that are not reservations: no_slab with a low half below both states'.
inline constexpr unsigned long long reserve_retry = slot_word(no_slab, 0);
inline constexpr unsigned long long reserve_failed = slot_word(no_slab, 1);

// Installs a fresh slab into a slot this thread owns (installing, or exhausted by its group);
// empty when the heap has none. Returns whether it found one.
GPUMEM_HD inline bool install_slab(heap_ref const& h, unsigned long long* slot, unsigned cls,
                                   std::uint32_t shard) {
  std::uint32_t const fresh = acquire_slab(h, cls, shard);
  atomic_store(slot, fresh == no_slab ? slot_empty : slot_word(fresh, 0), mem_order::release);
  return fresh != no_slab;
}

// The leader's step for a group of n lanes: a reservation {slab, first block}, or retry/failed.
GPUMEM_HD inline unsigned long long reserve_blocks(heap_ref const& h, unsigned long long* slot,
                                                   unsigned cls, std::uint32_t shard,
                                                   std::uint32_t n) {
  std::uint32_t const cap = class_capacity(h, cls);
  unsigned long long w = atomic_load(slot, mem_order::acquire);
  if (!slot_holds_slab(w)) {
    if (slot_is_installing(w)) return reserve_retry;
    // Empty (perhaps with late additions): take the word over whole; a failed CAS means it moved.
    if (!atomic_compare_exchange(slot, w, slot_installing, mem_order::acq_rel))
      return reserve_retry;
    return install_slab(h, slot, cls, shard) ? reserve_retry : reserve_failed;
  }
  if (static_cast<std::uint32_t>(w) >= cap) return reserve_retry;  // being retired
  unsigned long long const r =
      atomic_fetch_add(slot, static_cast<unsigned long long>(n), mem_order::acq_rel);
  // A late addition (the slot lost its slab since the load) reserved nothing.
  return slot_holds_slab(r) ? r : reserve_retry;
}

// Called once per slab, by the group whose reservation reached the capacity.
GPUMEM_HD inline void retire_slab(heap_ref const& h, unsigned long long* slot, unsigned cls,
                                  std::uint32_t shard, std::uint32_t slab) {
  install_slab(h, slot, cls, shard);
  drop_slab_refs(h, slab, 1);
}

GPUMEM_HD inline void* allocate_small(heap_ref const& h, std::size_t bytes) {
  unsigned const cls = size_class(bytes);
  std::uint32_t const shard = shard_of(h);
  unsigned long long* const slot = &h.slots[cls * h.shard_count + shard];
  std::uint32_t const cap = class_capacity(h, cls);
  unsigned const lane = warp::lane_id();
  for (;;) {
    unsigned const active = warp::active_mask();
    unsigned const peers =
        warp::match_any(active, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(slot)));
    unsigned const leader = warp::lowest_lane(peers);
    auto const n = static_cast<std::uint32_t>(warp::popcount(peers));
    auto const rank = static_cast<std::uint32_t>(warp::popcount(peers & warp::lanes_below()));
    unsigned long long r = 0;
    if (lane == leader) r = reserve_blocks(h, slot, cls, shard, n);
    r = warp::shuffle(peers, r, leader);
    if (r == reserve_failed) {
      if (lane == leader) {
        atomic_fetch_add(&h.counters->failures, static_cast<unsigned long long>(n) - 1,
                         mem_order::relaxed);
        record_failure(h, bytes);
      }
      return nullptr;
    }
    if (r == reserve_retry) {
      warp::pause();
      continue;
    }
    auto const slab = static_cast<std::uint32_t>(r >> 32);
    auto const bump = static_cast<std::uint32_t>(r);
    if (bump >= cap) {  // the slab ran out before our turn: its retirement is someone else's
      warp::pause();
      continue;
    }
    if (lane == leader && bump + n >= cap) retire_slab(h, slot, cls, shard, slab);
    if (rank < cap - bump) {
      return h.slabs + (static_cast<std::size_t>(slab) << h.slab_shift) +
             (static_cast<std::size_t>(bump + rank) << (4 + cls));
    }
  }
}

GPUMEM_HD inline int bit_count(unsigned long long v) {
#if GPUMEM_DEVICE_PASS
  return __popcll(v);
#else
  return __builtin_popcountll(v);
#endif
}

// Frees `ptr`, in slab `slab` of class `cls`. A pointer that is no block's start, or a block whose
// bit is already clear (freed before), is reported and changes nothing else.
//
// The bit is cleared with one fetch_and per group of lanes freeing blocks of the same 64-block word
// (match_any on the word, their bits or-ed together); its old value tells each lane whether its
// block was still live. Only when two lanes of the warp free the same block (their bits overlap)
// does each lane clear its own bit, so that exactly one of them sees it set. The lanes whose free
// counted then drop the slab's count: one fetch_sub per warp and slab.
GPUMEM_HD inline void free_small(heap_ref const& h, void* ptr, std::uint32_t slab, unsigned cls) {
  auto const offset = static_cast<std::size_t>(static_cast<char*>(ptr) - h.slabs);
  std::size_t const in_slab = offset & ((std::size_t{1} << h.slab_shift) - 1);
  if ((in_slab & ((std::size_t{16} << cls) - 1)) != 0) {  // inside a block
    record_invalid_free(h, ptr);
    return;
  }
  auto const block = static_cast<std::uint32_t>(in_slab >> (4 + cls));
  unsigned long long* const word = h.block_bits + slab * block_words(h.slab_shift) + block / 64u;
  unsigned long long const bit = 1ull << (block % 64u);
  // Every lane's writes to its block must precede the leader's decrement (one fence instruction
  // for the warp), so that the slab's next owner never sees them late.
  atomic_thread_fence(mem_order::release);
  unsigned const active = warp::active_mask();
  unsigned const lane = warp::lane_id();
  unsigned const same_word =
      warp::match_any(active, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(word)));
  unsigned long long const bits = warp::reduce_or(same_word, bit);
  unsigned long long old = 0;
  if (bit_count(bits) == warp::popcount(same_word)) {
    unsigned const leader = warp::lowest_lane(same_word);
    if (lane == leader) old = atomic_fetch_and(word, ~bits, mem_order::relaxed);
    old = warp::shuffle(same_word, old, leader);
  } else {
    old = atomic_fetch_and(word, ~bit, mem_order::relaxed);
  }
  bool const live = (old & bit) != 0;
  unsigned const counted = warp::ballot(active, live);
  if (!live) record_invalid_free(h, ptr);
  unsigned const peers = warp::match_any(active, slab);
  auto const k = static_cast<std::uint32_t>(warp::popcount(peers & counted));
  if (lane == warp::lowest_lane(peers) && k != 0) drop_slab_refs(h, slab, k);
}

}  // namespace gpumem::nrt::detail
