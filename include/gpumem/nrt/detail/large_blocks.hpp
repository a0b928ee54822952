// gpumem/nrt/detail/large_blocks.hpp
//
// The device heap's large blocks (above max_small_block; nrt/detail/slab_heap.hpp describes the
// algorithm): a first-fit run of whole slabs from the bitmap, marked on its first slab in
// slab_info (large_run | run length << 8) and freed once, by its start.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/nrt/detail/heap_ref.hpp>
#include <gpumem/nrt/detail/slab_bitmap.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::nrt::detail {

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
    word_span const w = span_in_word(s, end);
    unsigned long long const old = atomic_fetch_or(&h.bitmap[w.word], w.mask, mem_order::acquire);
    if ((old & w.mask) == 0) {
      s += w.count;
      continue;
    }
    atomic_fetch_and(&h.bitmap[w.word], ~(w.mask & ~old), mem_order::relaxed);
    clear_slab_bits(h, first, s, mem_order::relaxed);  // the words fully claimed before this one
    return w.word * 64u + lowest_bit(old & w.mask);
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

// Frees `ptr` in slab `slab`, whose slab_info `info` says it belongs to a run (large_run or
// not_a_run). A large block is freed once, by its start: the free that takes the run's mark
// releases it; a second free (before the slabs are taken again), or a pointer inside a run, is
// reported.
GPUMEM_HD inline void free_large(heap_ref const& h, void* ptr, std::uint32_t slab,
                                 std::uint32_t info) {
  auto const offset = static_cast<std::size_t>(static_cast<char*>(ptr) - h.slabs);
  bool const at_start = (offset & ((std::size_t{1} << h.slab_shift) - 1)) == 0;
  if (at_start && (info & 0xFFu) == large_run &&
      atomic_compare_exchange(&h.slab_info[slab], info, not_a_run, mem_order::relaxed)) {
    release_slabs(h, slab, info >> 8);
    return;
  }
  record_invalid_free(h, ptr);
}

}  // namespace gpumem::nrt::detail
