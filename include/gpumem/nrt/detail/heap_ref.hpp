// gpumem/nrt/detail/heap_ref.hpp
//
// What the device heap's code shares (nrt/detail/slab_heap.hpp describes the algorithm): the heap
// kinds, the `heap_ref` kernels receive by value (the layout of the heap's device memory), the
// size classes, and the counters device code reports through (failures, bad frees, slabs in use),
// which the host reads in device_heap::check() and usage(). Device code never traps: it records.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::nrt {

// Which allocator serves the heap: gpumem's slab heap, or CUDA's in-kernel malloc (std::malloc on
// the host backend), kept for comparison.
enum class heap_kind : std::uint32_t { gpumem = 0, cuda_malloc = 1 };

namespace detail {

// 16 B .. 64 KiB; above, whole slabs: every block stays within twice its request (docs/nrt.md).
inline constexpr unsigned slab_class_count = 13;
inline constexpr std::size_t max_small_block = std::size_t{16} << (slab_class_count - 1);
inline constexpr std::uint32_t no_slab = 0xFFFFFFFFu;
inline constexpr std::uint32_t large_run = 0xFFu;  // slab_info kind of a large run's first slab
// slab_info kind of a slab inside a live run, or of a freed run's first slab: not a block's start.
inline constexpr std::uint32_t not_a_run = 0xFEu;

// Counters the device writes and the host reads (device_heap::check(), usage()).
struct heap_counters {
  unsigned long long failures;           // allocations that returned null
  unsigned long long first_failed_size;  // size of the first one (0 = none yet)
  // Pointers given to deallocate that are no block of the heap: outside it, inside a block (a
  // large block's interior, a small block's), or a block already freed (a small block's second
  // free is seen until its slab is taken again for small blocks: docs/nrt.md).
  unsigned long long invalid_frees;
  unsigned long long first_invalid_free;
  unsigned long long used_slabs;
  unsigned long long peak_slabs;
};

// The small handle kernels receive by value. Every pointer is device memory owned by the
// device_heap the handle came from.
struct heap_ref {
  heap_kind kind;
  std::uint32_t slab_shift;  // log2 of the slab size
  std::uint32_t slab_count;
  std::uint32_t shard_count;
  std::uint32_t bitmap_words;
  char* slabs;
  unsigned long long* bitmap;
  std::uint32_t* remaining;   // per slab (small classes)
  std::uint32_t* slab_info;   // per slab: class, or large_run | run length << 8 on a run's first
  unsigned long long* slots;  // [class][shard]
  // Per slab, block_words(h) words: bit i set while block i of a small slab's class has not been
  // freed since the slab was taken (every block's bit is set then; a free clears its own).
  unsigned long long* block_bits;
  heap_counters* counters;
};

// A shard index for the calling thread: its SM on the device (so warps of one SM share slot
// words), a per-thread value on the host.
std::uint32_t host_shard_hint() noexcept;

GPUMEM_HD inline std::uint32_t shard_hint() {
#if GPUMEM_DEVICE_PASS
  std::uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
#else
  return host_shard_hint();
#endif
}

GPUMEM_HD inline std::uint32_t shard_of(heap_ref const& h) {
  return shard_hint() % h.shard_count;
}

GPUMEM_HD inline unsigned size_class(std::size_t bytes) {
  unsigned c = 0;
  while ((std::size_t{16} << c) < bytes)
    ++c;
  return c;
}

GPUMEM_HD inline std::uint32_t class_capacity(heap_ref const& h, unsigned cls) {
  return std::uint32_t{1} << (h.slab_shift - 4 - cls);
}

// Words of block bits per slab: one bit per block of the smallest class (16 bytes), 1/128 of the
// slab's bytes.
GPUMEM_HD constexpr std::size_t block_words(std::uint32_t slab_shift) {
  return std::size_t{1} << (slab_shift - 10);
}

// The bytes a block allocated for `bytes` holds: its size class, or whole slabs, on gpumem's heap;
// `bytes` itself on cuda_malloc (CUDA's malloc does not say) and for a size no heap serves. Never
// above max_allocation_bytes.
GPUMEM_HD inline std::size_t block_bytes(heap_ref const& h, std::size_t bytes) {
  if (h.kind != heap_kind::gpumem || bytes > max_allocation_bytes) return bytes;
  if (bytes <= max_small_block) return std::size_t{16} << size_class(bytes);
  std::size_t rounded = 0;
  if (!round_up_checked(bytes, std::size_t{1} << h.slab_shift, rounded)) return bytes;
  return rounded <= max_allocation_bytes ? rounded : bytes;
}

GPUMEM_HD inline void record_failure(heap_ref const& h, std::size_t bytes) {
  atomic_fetch_add(&h.counters->failures, 1ull, mem_order::relaxed);
  unsigned long long expected = 0;
  atomic_compare_exchange(&h.counters->first_failed_size, expected,
                          static_cast<unsigned long long>(bytes == 0 ? 1 : bytes),
                          mem_order::relaxed);
}

// A free of `ptr`, which is no block of the heap (or one already freed): changes nothing else.
GPUMEM_HD inline void record_invalid_free(heap_ref const& h, void const* ptr) {
  atomic_fetch_add(&h.counters->invalid_frees, 1ull, mem_order::relaxed);
  unsigned long long expected = 0;
  atomic_compare_exchange(&h.counters->first_invalid_free, expected,
                          static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)),
                          mem_order::relaxed);
}

GPUMEM_HD inline void count_slabs(heap_ref const& h, long long delta) {
  auto const now = atomic_fetch_add(&h.counters->used_slabs, static_cast<unsigned long long>(delta),
                                    mem_order::relaxed) +
                   static_cast<unsigned long long>(delta);
  if (delta > 0) atomic_fetch_max(&h.counters->peak_slabs, now);
}

}  // namespace detail
}  // namespace gpumem::nrt
