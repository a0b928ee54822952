// gpumem/nrt/detail/slab_heap.hpp
//
// The algorithms of gpumem's device heap (device code, GPUMEM_HD; the host backend runs the same
// code with one-lane warps), and its two entry points, heap_allocate and heap_deallocate. The
// host-side owner is gpumem::nrt::device_heap; this code only knows a `heap_ref`: the layout of
// the heap's device memory, passed by value. The parts:
//   nrt/detail/heap_ref.hpp      heap_ref, heap kinds, size classes, the counters device code
//                                reports through
//   nrt/detail/slab_bitmap.hpp   the slab bitmap: claiming and releasing slabs, bounded retries
//   nrt/detail/small_blocks.hpp  slots, warp-aggregated reservation, small frees
//   nrt/detail/large_blocks.hpp  runs of slabs
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
// being some slot's current slab (dropped at retirement), and one bit per block, all set (the
// block bits: 1/128 of the slab's bytes). A free clears its block's bit (one fetch_and per warp
// and per word of 64 blocks) and, when the bit was set, subtracts from `remaining`
// (warp-aggregated per slab); the thread that brings it to zero releases the slab to the bitmap. A
// bit found clear is a second free: reported, nothing else changes. Blocks are not reused inside a
// slab: a slab is recycled whole, which keeps the fast path to one atomic per warp and per slab
// (and one per word of block bits). The price: one live block keeps its slab (and a slot's current
// slab stays held until trim()).
//
// Shards spread the hot slot words (per SM on the device): one global counter tops out near
// 42 G atomics/s on an H200, far below what warp aggregation over many slots reaches.
//
// Large blocks take a first-fit run of whole slabs from the bitmap. A search that finds nothing is
// repeated (bounded, with pauses) while the count of used slabs says the request may fit: under
// contention one pass can lose every race although the heap could serve it.
//
// Exhaustion returns null and records the failure (count, first failing size) for the host's
// device_heap::check(); so does a size no heap can serve (above max_allocation_bytes, or one whose
// round-up to whole slabs would wrap). A bad free (outside the heap, inside a block, a block
// already freed) is recorded the same way and changes nothing. Nothing here traps or throws.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/nrt/detail/heap_ref.hpp>
#include <gpumem/nrt/detail/large_blocks.hpp>
#include <gpumem/nrt/detail/small_blocks.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace gpumem::nrt::detail {

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

// Gives `ptr` back; null is ignored. A pointer that is no block of the heap (outside it, inside a
// block) or a block already freed is recorded for device_heap::check() and changes nothing.
GPUMEM_HD inline void heap_deallocate(heap_ref const& h, void* ptr) {
  if (ptr == nullptr) return;
  if (h.kind == heap_kind::cuda_malloc) {
#if GPUMEM_DEVICE_PASS
    free(ptr);
#else
    std::free(ptr);
#endif
    return;
  }
  auto const offset = static_cast<char*>(ptr) - h.slabs;
  if (offset < 0 || static_cast<std::size_t>(offset) >=
                        (static_cast<std::size_t>(h.slab_count) << h.slab_shift)) {
    record_invalid_free(h, ptr);
    return;
  }
  auto const slab = static_cast<std::uint32_t>(static_cast<std::size_t>(offset) >> h.slab_shift);
  std::uint32_t const info = atomic_load(&h.slab_info[slab], mem_order::relaxed);
  if ((info & 0xFFu) == large_run || (info & 0xFFu) == not_a_run) {
    free_large(h, ptr, slab, info);
    return;
  }
  free_small(h, ptr, slab, info);
}

}  // namespace gpumem::nrt::detail
