// gpumem/nrt/detail/slab_heap.hpp
//
// The algorithms of gpumem's device heap (device code, GPUMEM_HD; the host backend runs the same
// code with one-lane warps). The host-side owner is gpumem::nrt::device_heap; this file only
// knows a `heap_ref`: the layout of the heap's device memory, passed by value.
//
// Layout. The heap is an array of equal slabs (a power of two, 128 KiB by default) and a bitmap
// with one bit per slab (1 = in use). A slab either serves one small size class (16 B << c for
// c < slab_class_count, blocks naturally aligned inside the slab) or belongs to a run of slabs
// holding one large block (slab-aligned).
//
// Small blocks. Each (class, shard) pair has a slot: one 64-bit word {slab index : 32 | bump : 32}.
// Allocation is warp-aggregated: lanes asking for the same slot elect a leader, whose single
// fetch_add on the slot reserves n consecutive blocks; the result is broadcast and each lane takes
// old bump + rank. Because the slab index and the bump counter sit in one word, a reservation
// always names the slab it came from: a slab recycled under a slow thread can never hand out a
// block of the wrong class (no ABA). The lane group whose reservation reaches the slab's capacity
// retires it: it acquires a fresh slab (or marks the slot empty when the heap is exhausted). Lanes
// that find the slot exhausted wait for that store; a group that finds it empty marks it
// "installing" (CAS) and acquires the slab, the others wait: one acquisition per slot at a time,
// so a small heap never fails a request while slabs are merely in flight between groups. The
// fetch_add is not guarded by a CAS, so it may land after the slot went empty or installing: those
// states are encoded to absorb it (see slot_word).
//
// Freeing. Each slab has `remaining` = capacity + 1 at acquisition: one per block, plus one for
// being some slot's current slab (dropped at retirement). A free subtracts (warp-aggregated per
// slab); the thread that brings it to zero releases the slab to the bitmap. Blocks are not reused
// inside a slab: a slab is recycled whole, which keeps the fast path to one atomic per warp and
// per slab. The price: one live block keeps its slab (and a slot's current slab stays held until
// trim()).
//
// Shards spread the hot slot words (per SM on the device): one global counter tops out near
// 42 G atomics/s on an H200, far below what warp aggregation over many slots reaches.
//
// Large blocks take a first-fit run of whole slabs from the bitmap. A search that finds nothing is
// repeated (bounded, with pauses) while the count of used slabs says the request may fit: under
// contention one pass can lose every race although the heap could serve it.
//
// Bad frees. A pointer outside the heap, inside a block (not at a multiple of its class's size in a
// small slab, or past a large block's start), or to a large block already freed is counted and
// ignored (heap_deallocate returns false, so the NRT does not count it as a free). A small
// block's second free is seen only on a checked heap (heap_options::check_frees, or
// GPUMEM_DEBUG_MEMORY=1): one more bit per 16 bytes of slab (heap_ref::freed), turned to the
// slab's phase by each free (one atomic per lane), so that a second free finds it so while the
// slab is in the same generation; the phase flips when the slab is taken for a class (slab_phase).
// Unchecked, such a free counts twice against its slab, which is then released while another of its
// blocks is live.
//
// Exhaustion returns null and records the failure (count, first failing size) for the host's
// device_heap::check(); so does a size no heap can serve (above max_allocation_bytes, or one whose
// round-up to whole slabs would wrap). Nothing here traps or throws.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/warp.hpp>
#include <gpumem/nrt/detail/slab_heap_core.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace gpumem::nrt::detail {

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

// The first `run` consecutive slabs that look free (one relaxed load per stretch of equal bits)
// among those starting at or after `from`; no_slab when there are none.
GPUMEM_HD inline std::uint32_t find_free_run(heap_ref const& h, std::uint32_t from,
                                             std::uint32_t run) {
  std::uint32_t start = from;
  std::uint32_t length = 0;
  std::uint32_t s = from;
  while (s < h.slab_count) {
    std::uint32_t const lo = s % 64u;
    std::uint32_t const left = (h.slab_count - s) < (64u - lo) ? (h.slab_count - s) : (64u - lo);
    unsigned long long const bits = atomic_load(&h.bitmap[s / 64u], mem_order::relaxed) >> lo;
    if ((bits & 1ull) != 0) {  // busy: skip the busy stretch
      std::uint32_t const busy = ~bits == 0 ? 64u : lowest_bit(~bits);
      s += busy < left ? busy : left;
      length = 0;
      continue;
    }
    std::uint32_t const free_len = bits == 0 ? 64u : lowest_bit(bits);
    if (length == 0) start = s;
    std::uint32_t const n = free_len < left ? free_len : left;
    length += n;
    s += n;
    if (length >= run) return start;
  }
  return no_slab;
}

// Sets the bits of [first, first + run) word by word (fetch_or). On a conflict it clears exactly
// the bits it set (whole words before the conflicting one, the newly set bits of that one) and
// returns a slab found taken; no_slab when the run is now this thread's.
GPUMEM_HD inline std::uint32_t claim_run(heap_ref const& h, std::uint32_t first,
                                         std::uint32_t run) {
  std::uint32_t s = first;
  std::uint32_t const end = first + run;
  while (s < end) {
    bitmap_span const span = span_at(s, end);
    unsigned long long const old =
        atomic_fetch_or(&h.bitmap[span.word], span.mask, mem_order::acquire);
    if ((old & span.mask) == 0) {
      s += span.count;
      continue;
    }
    atomic_fetch_and(&h.bitmap[span.word], ~(span.mask & ~old), mem_order::relaxed);
    clear_slab_bits(h, first, s, mem_order::relaxed);  // the words fully claimed before this one
    return span.word * 64u + lowest_bit(old & span.mask);
  }
  return no_slab;
}

// Large blocks: first fit over the bitmap for `run` consecutive free slabs (first fit from slab 0
// keeps large runs packed, so a later request for most of the heap still finds room). A pass that
// loses every race is repeated while the slab count says the run may fit (search_again): under
// contention a pass can fail although the heap could serve the request.
GPUMEM_HD inline void* allocate_large(heap_ref const& h, std::size_t bytes) {
  // Rounded up to whole slabs without wrapping: a size near SIZE_MAX must not become a run of 0
  // slabs (which would "fit" anywhere and overlap live blocks).
  std::size_t rounded = 0;
  bool const fits = round_up_checked(bytes, std::size_t{1} << h.slab_shift, rounded);
  std::size_t const run_size = rounded >> h.slab_shift;
  if (!fits || run_size > h.slab_count || run_size >= (std::size_t{1} << 24)) {
    record_failure(h, bytes);
    return nullptr;
  }
  auto const run = static_cast<std::uint32_t>(run_size);
  for (unsigned attempt = 0;; ++attempt) {
    std::uint32_t from = 0;
    for (;;) {
      std::uint32_t const first = find_free_run(h, from, run);
      if (first == no_slab) break;
      std::uint32_t const conflict = claim_run(h, first, run);
      if (conflict == no_slab) {
        // The slabs inside the run lose whatever they were (a freed run's start, a small class):
        // a free of a pointer to one of them is then seen for what it is.
        for (std::uint32_t s = first + 1; s < first + run; ++s)
          atomic_store(&h.slab_info[s], not_a_run, mem_order::relaxed);
        atomic_store(&h.slab_info[first], large_run | (run << 8), mem_order::relaxed);
        count_slabs(h, run);
        return h.slabs + (static_cast<std::size_t>(first) << h.slab_shift);
      }
      from = conflict + 1;
    }
    if (!search_again(h, attempt, run)) break;
  }
  record_failure(h, bytes);
  return nullptr;
}

// A block of `bytes`, or null (recorded for device_heap::check()) when the heap cannot serve it;
// sizes above max_allocation_bytes always fail, on either kind of heap.
GPUMEM_HD inline void* heap_allocate(heap_ref const& h, std::size_t bytes) {
  if (bytes > max_allocation_bytes) {
    record_failure(h, bytes);
    return nullptr;
  }
  if (h.kind == heap_kind::cuda_malloc) {
#if GPUMEM_DEVICE_PASS
    void* p = malloc(bytes);
#else
    void* p = std::malloc(bytes);
#endif
    if (p == nullptr) record_failure(h, bytes);
    return p;
  }
  return bytes <= max_small_block ? allocate_small(h, bytes) : allocate_large(h, bytes);
}

// Frees `ptr`; true when the heap took it as a block's free, false for null and for a free it
// refused (counted and recorded for device_heap::check()). Unchecked, a small block's second free
// is taken (true); on a cuda_malloc heap, every non-null pointer is (free() cannot tell).
GPUMEM_HD inline bool heap_deallocate(heap_ref const& h, void* ptr) {
  if (ptr == nullptr) return false;
  if (h.kind == heap_kind::cuda_malloc) {
#if GPUMEM_DEVICE_PASS
    free(ptr);
#else
    std::free(ptr);
#endif
    return true;
  }
  auto const offset = static_cast<char*>(ptr) - h.slabs;
  auto const invalid = [&] {
    atomic_fetch_add(&h.counters->invalid_frees, 1ull, mem_order::relaxed);
    unsigned long long expected = 0;
    atomic_compare_exchange(&h.counters->first_invalid_free, expected,
                            static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)),
                            mem_order::relaxed);
  };
  if (offset < 0 || static_cast<std::size_t>(offset) >=
                        (static_cast<std::size_t>(h.slab_count) << h.slab_shift)) {
    invalid();
    return false;
  }
  auto const slab = static_cast<std::uint32_t>(static_cast<std::size_t>(offset) >> h.slab_shift);
  std::uint32_t info = atomic_load(&h.slab_info[slab], mem_order::relaxed);
  if ((info & 0xFFu) == large_run || (info & 0xFFu) == not_a_run) {
    // A large block is freed once, by its start: the free that takes the run's mark releases it;
    // a second free (before the slabs are taken again), or a pointer inside a run, is reported.
    bool const at_start =
        (static_cast<std::size_t>(offset) & ((std::size_t{1} << h.slab_shift) - 1)) == 0;
    if (at_start && (info & 0xFFu) == large_run &&
        atomic_compare_exchange(&h.slab_info[slab], info, not_a_run, mem_order::relaxed)) {
      release_slabs(h, slab, info >> 8);
      return true;
    }
    invalid();
    return false;
  }
  // A small block starts at a multiple of its class's size inside its slab. On a checked heap, its
  // slab is in use and the block is not freed yet: each free turns the block's bits to the slab's
  // phase, and a second one finds its first bit there already (without the check, it would release
  // the slab while a block in it is live).
  std::size_t const in_slab =
      static_cast<std::size_t>(offset) & ((std::size_t{1} << h.slab_shift) - 1);
  unsigned const cls = info & 0xFFu;
  if (cls >= slab_class_count || (in_slab & ((std::size_t{16} << cls) - 1)) != 0) {
    invalid();
    return false;
  }
  if (h.freed != nullptr) {
    if ((atomic_load(&h.bitmap[slab / 64u], mem_order::relaxed) & (1ull << (slab % 64u))) == 0) {
      invalid();  // the slab is free
      return false;
    }
    // The bits of the block's 16-byte granules become the phase (slab_phase): all of them, so
    // that the slab ends its generation with every bit at the phase whatever its class, and a
    // block of another class later starts on a bit that the flip makes "not freed". The first
    // bit was the phase already if the block was freed before.
    std::size_t const first = in_slab >> 4;
    std::size_t const granules = std::size_t{1} << cls;
    unsigned long long* const word = &h.freed[slab * freed_words_per_slab(h) + first / 64];
    unsigned long long const lead = 1ull << (first % 64);
    unsigned long long const mask = granules >= 64 ? ~0ull : ((lead << granules) - lead);
    bool const phase = (atomic_load(&h.remaining[slab], mem_order::relaxed) & slab_phase) != 0;
    unsigned long long const old = phase ? atomic_fetch_or(word, mask, mem_order::relaxed)
                                         : atomic_fetch_and(word, ~mask, mem_order::relaxed);
    if (((old & lead) != 0) == phase) {
      invalid();  // freed twice
      return false;
    }
    for (std::size_t w = 1; w < granules / 64; ++w)  // words of this block alone (above 1 KiB)
      atomic_store(word + w, phase ? ~0ull : 0ull, mem_order::relaxed);
  }
  // Every lane's writes to its block must precede the leader's decrement (one fence instruction
  // for the warp), so that the slab's next owner never sees them late.
  atomic_thread_fence(mem_order::release);
  unsigned const active = warp::active_mask();
  unsigned const peers = warp::match_any(active, slab);
  if (warp::lane_id() == warp::lowest_lane(peers))
    drop_slab_refs(h, slab, static_cast<std::uint32_t>(warp::popcount(peers)));
  return true;
}

}  // namespace gpumem::nrt::detail
