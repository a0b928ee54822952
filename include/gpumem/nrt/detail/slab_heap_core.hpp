// gpumem/nrt/detail/slab_heap_core.hpp
//
// The device heap's shared pieces (device code, GPUMEM_HD): the handle kernels receive (heap_ref),
// the counters the host reads, and the slab bitmap with the acquisition and release of slabs. The
// small and large block paths built on them, and the algorithm's description, are in slab_heap.hpp.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/warp.hpp>

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
  // Pointers given to deallocate that are no block of the heap: outside it, inside a block, a
  // large block already freed, and on a checked heap (heap_ref::freed) a small block already freed
  // or one in a slab that is free.
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
  std::uint32_t* remaining;   // per slab (small classes): a count, and the phase (slab_phase)
  std::uint32_t* slab_info;   // per slab: class, or large_run | run length << 8 on a run's first
  unsigned long long* slots;  // [class][shard]
  heap_counters* counters;
  // A checked heap's record of small frees: per slab, one bit per 16 bytes, turned to the slab's
  // phase (slab_phase) by the free of the block that starts there (null: not checked).
  unsigned long long* freed;
};

// The top bit of a slab's `remaining` word: its phase, flipped each time the slab is taken for a
// class. On a checked heap a block is freed in the slab's current generation when its bit in
// heap_ref::freed equals the phase: a slab leaves a generation with the bits of all its blocks
// equal to the phase (each was handed out and freed; device_heap::trim() sets those of the blocks
// it never handed out), so flipping the phase marks them all not freed, with no loop over them
// when the slab is taken (such a loop in the slot path cost unchecked heaps up to a third of their
// allocation rate on an H100).
inline constexpr std::uint32_t slab_phase = 0x80000000u;

// Words of heap_ref::freed per slab: one bit per 16 bytes.
GPUMEM_HD inline std::size_t freed_words_per_slab(heap_ref const& h) {
  return std::size_t{1} << (h.slab_shift - 10);
}

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

GPUMEM_HD inline void record_failure(heap_ref const& h, std::size_t bytes) {
  atomic_fetch_add(&h.counters->failures, 1ull, mem_order::relaxed);
  unsigned long long expected = 0;
  atomic_compare_exchange(&h.counters->first_failed_size, expected,
                          static_cast<unsigned long long>(bytes == 0 ? 1 : bytes),
                          mem_order::relaxed);
}

GPUMEM_HD inline void count_slabs(heap_ref const& h, long long delta) {
  auto const now = atomic_fetch_add(&h.counters->used_slabs, static_cast<unsigned long long>(delta),
                                    mem_order::relaxed) +
                   static_cast<unsigned long long>(delta);
  if (delta > 0) atomic_fetch_max(&h.counters->peak_slabs, now);
}

GPUMEM_HD inline unsigned long long word_valid_mask(heap_ref const& h, std::uint32_t word) {
  std::uint32_t const bits = h.slab_count - word * 64u;
  return bits >= 64 ? ~0ull : ((1ull << bits) - 1);
}

// Index of the lowest set bit of a non-zero word.
GPUMEM_HD inline std::uint32_t lowest_bit(unsigned long long v) {
#if GPUMEM_DEVICE_PASS
  return static_cast<std::uint32_t>(__ffsll(static_cast<long long>(v)) - 1);
#else
  return static_cast<std::uint32_t>(__builtin_ctzll(v));
#endif
}

// One pass of acquire_slab over the bitmap, starting at word `start`.
GPUMEM_HD inline std::uint32_t acquire_slab_pass(heap_ref const& h, unsigned cls,
                                                 std::uint32_t start) {
  for (std::uint32_t i = 0; i < h.bitmap_words; ++i) {
    std::uint32_t w = start + i;
    if (w >= h.bitmap_words) w -= h.bitmap_words;
    unsigned long long const valid = word_valid_mask(h, w);
    unsigned long long v = atomic_load(&h.bitmap[w], mem_order::relaxed);
    while ((~v & valid) != 0) {
      unsigned long long const free_bits = ~v & valid;
      unsigned long long const bit = free_bits & (~free_bits + 1);  // lowest free slab
      unsigned long long const old = atomic_fetch_or(&h.bitmap[w], bit, mem_order::acquire);
      if ((old & bit) == 0) {
        std::uint32_t const s = w * 64u + lowest_bit(bit);
        // Published to other threads by the release store/CAS of the slot that names s.
        std::uint32_t const phase = ~atomic_load(&h.remaining[s], mem_order::relaxed) & slab_phase;
        atomic_store(&h.remaining[s], (class_capacity(h, cls) + 1) | phase, mem_order::relaxed);
        atomic_store(&h.slab_info[s], static_cast<std::uint32_t>(cls), mem_order::relaxed);
        count_slabs(h, 1);
        return s;
      }
      v = old;
    }
  }
  return no_slab;
}

// A search of the bitmap that found nothing is repeated while the slab count says the request may
// fit: a pass can miss free slabs because other threads hold bits only for a moment (a large claim
// that meets a conflict sets bits and clears them again) or free slabs behind the scan. At most
// this many passes, with growing pauses between them, so a heap that is merely fragmented still
// answers null in bounded time. The cost is off the fast path: slab acquisition and large blocks.
inline constexpr unsigned search_attempts = 1024;

// Whether another pass may find `slabs` free slabs, and if so waits a little before it.
GPUMEM_HD inline bool search_again(heap_ref const& h, unsigned attempt, std::uint32_t slabs) {
  if (attempt + 1 >= search_attempts) return false;
  // used_slabs is raised after a claim and lowered before a release, so it may say "free" a
  // moment too long (one more pass) but never says "full" while slabs are free.
  unsigned long long const used = atomic_load(&h.counters->used_slabs, mem_order::relaxed);
  if (used + slabs > h.slab_count) return false;
  unsigned const pauses = 1u << (attempt < 4 ? attempt : 4);
  for (unsigned i = 0; i < pauses; ++i)
    warp::pause();
  return true;
}

// Claims one free slab for class `cls` and prepares it; no_slab when none is free. Shards start
// their search in different parts of the bitmap so that they rarely meet.
GPUMEM_HD inline std::uint32_t acquire_slab(heap_ref const& h, unsigned cls, std::uint32_t shard) {
  std::uint32_t const start = static_cast<std::uint32_t>(
      (static_cast<unsigned long long>(shard) * h.bitmap_words) / h.shard_count);
  for (unsigned attempt = 0;; ++attempt) {
    std::uint32_t const s = acquire_slab_pass(h, cls, start);
    if (s != no_slab || !search_again(h, attempt, 1)) return s;
  }
}

// The bits of slabs [s, end) that lie in slab s's bitmap word: the word, how many, and their mask.
struct bitmap_span {
  std::uint32_t word;
  std::uint32_t count;
  unsigned long long mask;
};
GPUMEM_HD inline bitmap_span span_at(std::uint32_t s, std::uint32_t end) {
  std::uint32_t const lo = s % 64u;
  std::uint32_t const n = (end - s) < (64u - lo) ? (end - s) : (64u - lo);
  return {s / 64u, n, (n == 64 ? ~0ull : ((1ull << n) - 1)) << lo};
}

// Clears the bits of slabs [first, end), word by word.
GPUMEM_HD inline void clear_slab_bits(heap_ref const& h, std::uint32_t first, std::uint32_t end,
                                      mem_order order) {
  for (std::uint32_t s = first; s < end;) {
    bitmap_span const span = span_at(s, end);
    atomic_fetch_and(&h.bitmap[span.word], ~span.mask, order);
    s += span.count;
  }
}

GPUMEM_HD inline void release_slabs(heap_ref const& h, std::uint32_t first, std::uint32_t count) {
  count_slabs(h, -static_cast<long long>(count));
  clear_slab_bits(h, first, first + count, mem_order::release);
}

// Drops `k` of a small slab's remaining count; the last one releases it.
GPUMEM_HD inline void drop_slab_refs(heap_ref const& h, std::uint32_t s, std::uint32_t k) {
  if ((atomic_fetch_sub(&h.remaining[s], k, mem_order::acq_rel) & ~slab_phase) == k)
    release_slabs(h, s, 1);
}

}  // namespace detail
}  // namespace gpumem::nrt
