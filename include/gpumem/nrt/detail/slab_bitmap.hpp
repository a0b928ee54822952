// gpumem/nrt/detail/slab_bitmap.hpp
//
// The device heap's slab bookkeeping (nrt/detail/slab_heap.hpp describes the algorithm): one bit
// per slab in a bitmap (1 = in use), claimed with fetch_or and released with fetch_and; the count
// of used slabs; and the bounded repetition of a search that found nothing while the count says
// the request may fit. Single slabs (for the small classes) are claimed here; runs of slabs for
// large blocks in nrt/detail/large_blocks.hpp.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/warp.hpp>
#include <gpumem/nrt/detail/heap_ref.hpp>

#include <cstdint>

namespace gpumem::nrt::detail {

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

// One pass of claim_slab over the bitmap, starting at word `start`.
GPUMEM_HD inline std::uint32_t claim_slab_pass(heap_ref const& h, std::uint32_t start) {
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
        count_slabs(h, 1);
        return w * 64u + lowest_bit(bit);
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

// Claims one free slab (its bit set, counted in used_slabs); no_slab when none is free. Shards
// start their search in different parts of the bitmap so that they rarely meet.
GPUMEM_HD inline std::uint32_t claim_slab(heap_ref const& h, std::uint32_t shard) {
  std::uint32_t const start = static_cast<std::uint32_t>(
      (static_cast<unsigned long long>(shard) * h.bitmap_words) / h.shard_count);
  for (unsigned attempt = 0;; ++attempt) {
    std::uint32_t const s = claim_slab_pass(h, start);
    if (s != no_slab || !search_again(h, attempt, 1)) return s;
  }
}

// The slabs of [s, end) that share slab s's bitmap word: the word, how many, and their bits.
struct word_span {
  std::uint32_t word;
  std::uint32_t count;
  unsigned long long mask;
};

GPUMEM_HD inline word_span span_in_word(std::uint32_t s, std::uint32_t end) {
  std::uint32_t const lo = s % 64u;
  std::uint32_t const k = (end - s) < (64u - lo) ? (end - s) : (64u - lo);
  return {s / 64u, k, (k == 64 ? ~0ull : ((1ull << k) - 1)) << lo};
}

// Clears the bits of slabs [first, end), one fetch_and per word.
GPUMEM_HD inline void clear_slab_bits(heap_ref const& h, std::uint32_t first, std::uint32_t end,
                                      mem_order order) {
  for (std::uint32_t s = first; s < end;) {
    word_span const w = span_in_word(s, end);
    atomic_fetch_and(&h.bitmap[w.word], ~w.mask, order);
    s += w.count;
  }
}

GPUMEM_HD inline void release_slabs(heap_ref const& h, std::uint32_t first, std::uint32_t count) {
  count_slabs(h, -static_cast<long long>(count));
  clear_slab_bits(h, first, first + count, mem_order::release);
}

}  // namespace gpumem::nrt::detail
