// gpumem/strings/detail/heap.hpp
//
// The strings layer's door to the NRT heap: out-of-line wrappers of NRT_Allocate and NRT_Free, so
// that every string type shares one copy of the heap code per translation unit (device code
// compiles faster, hot paths stay small), and the growth rule of string buffers. Not API.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/nrt/detail/heap_ref.hpp>
#include <gpumem/nrt/detail/memsys_state.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/strings/types.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::strings::detail {

// Null when there is no current memory system (code not run by nrt::launch), when the heap is
// exhausted (recorded for memsys::check()), or for a byte count that is not positive.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline void* heap_allocate(size_type bytes) {
  if (bytes <= 0) return nullptr;
  return NRT_Allocate(static_cast<std::size_t>(bytes));
}

GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline void heap_free(void* p) {
  NRT_Free(p);
}

// The capacity to allocate for `needed` bytes when `current` are held (`needed` > current), before
// the heap has its say: double the current capacity (`minimum` from empty), then powers of two up
// to 64 KiB, and at least `needed`. Never wraps.
GPUMEM_HD inline size_type doubled_capacity(size_type current, size_type needed,
                                            size_type minimum) {
  constexpr size_type small_limit = size_type{64} << 10;
  size_type cap = minimum;
  if (current > 0) cap = current <= INT64_MAX / 2 ? current * 2 : needed;
  while (cap < needed && cap < small_limit)
    cap *= 2;
  return cap < needed ? needed : cap;
}

// The doubled capacity, rounded up to all that `heap` gives a block of that size
// (nrt::detail::block_bytes), so that what the block holds anyway is used. gpumem's slab heap gives
// whole slabs above 64 KiB (128 KiB by default): an append of 3 bytes to a 70,000-byte result then
// needs no second block of 256 KiB while the first is live. CUDA's malloc says nothing of its
// blocks: its capacity is the doubled one. Never wraps.
GPUMEM_HD inline size_type grown_capacity(nrt::detail::heap_ref const& heap, size_type current,
                                          size_type needed, size_type minimum) {
  size_type const cap = doubled_capacity(current, needed, minimum);
  std::size_t const holds = nrt::detail::block_bytes(heap, static_cast<std::size_t>(cap));
  return holds <= static_cast<std::size_t>(INT64_MAX) ? static_cast<size_type>(holds) : cap;
}

// grown_capacity for the heap of the current memory system (the one heap_allocate uses); without
// one (where every allocation fails), the doubled capacity.
GPUMEM_HD inline size_type grown_capacity(size_type current, size_type needed, size_type minimum) {
  nrt::detail::memsys_state const* const ms = nrt::detail::current_memsys();
  if (ms == nullptr) return doubled_capacity(current, needed, minimum);
  return grown_capacity(ms->heap, current, needed, minimum);
}

}  // namespace gpumem::strings::detail
