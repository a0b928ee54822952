// gpumem/strings/detail/heap.hpp
//
// The strings layer's door to the NRT heap: out-of-line wrappers of NRT_Allocate and NRT_Free, so
// that every string type shares one copy of the heap code per translation unit (device code
// compiles faster, hot paths stay small). Not API.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/strings/types.hpp>

#include <cstddef>

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

// A size past INT64_MAX, which no string can have: recorded on the current heap (nrt::launch's;
// none outside it) as a failed allocation of SIZE_MAX bytes, so that memsys::check() and
// strings::transform report it as they report an exhausted heap (a UDF may go on from the failed
// string, which reads as empty); then `s` (a udf_string or string_list) fails with
// errc::out_of_memory.
template <class String>
GPUMEM_STRINGS_NOINLINE GPUMEM_HD void fail_oversized(String& s) {
  if (nrt::detail::memsys_state* const ms = nrt::detail::current_memsys())
    nrt::detail::record_failure(ms->heap, ~std::size_t{0});
  s.set_error(errc::out_of_memory);
}

// The capacity to allocate for `needed` bytes when `current` are held (`needed` > current):
// double the current capacity (`minimum` from empty), then powers of two up to 64 KiB (the heap's
// small size classes round up to them anyway), and at least `needed`. Above 64 KiB the heap gives
// whole slabs (128 KiB by default): the capacity is rounded up to 128 KiB, so that what the block
// holds anyway is used (an append of 3 bytes to a 70,000-byte result needs no second block of
// 256 KiB while the first is live). Never wraps.
GPUMEM_HD inline size_type grown_capacity(size_type current, size_type needed, size_type minimum) {
  constexpr size_type small_limit = size_type{64} << 10;
  constexpr size_type slab_step = size_type{128} << 10;
  size_type cap = minimum;
  if (current > 0) cap = current <= INT64_MAX / 2 ? current * 2 : needed;
  while (cap < needed && cap < small_limit)
    cap *= 2;
  if (cap < needed) cap = needed;
  if (cap > small_limit && cap <= INT64_MAX - slab_step)
    cap = (cap + slab_step - 1) / slab_step * slab_step;
  return cap;
}

}  // namespace gpumem::strings::detail
