// gpumem/nrt/meminfo.hpp
//
// The NRT device C API, by Numba's names and with Numba's MemInfo layout, so that code written
// for Numba's CUDA runtime (cuDF's string UDF shims, for instance) compiles against gpumem:
//
//   NRT_Allocate(size) / NRT_Free(ptr)              raw blocks from the current device heap
//   NRT_MemInfo_init(mi, data, size, dtor, info)    refct = 1 on a meminfo at the START of a block
//                                                   from NRT_Allocate (freed with it)
//   NRT_MemInfo_new(data, size, dtor, info)         a separately allocated meminfo for `data`
//   NRT_MemInfo_alloc_aligned(size, align)          meminfo and `size` bytes at `align`, one block
//   NRT_incref(mi) / NRT_decref(mi)                 null-safe
//   NRT_MemInfo_call_dtor(mi)                       dtor(data, size, dtor_info), then frees mi
//   NRT_MemInfo_data_fast(mi)                       mi->data
//
// Differences from Numba's CUDA NRT, on purpose:
//   * NRT_decref is ONE atomic fetch_sub (acq_rel): the thread that takes the count from 1 to 0,
//     and only it, runs the destructor. (Decrement-then-test in two steps lets two threads both
//     see zero and destroy twice.)
//   * A decref that finds the count at zero is an error: the count is put back (it never stays
//     wrapped), no destructor runs, and the memory system records it for memsys::check(). An
//     incref from zero (resurrecting a dying object) is recorded and undone the same way.
//     "Found zero" includes the values above 2^63: while N threads decref a dead object at once,
//     the count passes through -1 .. -N before their restores land, and each of them must be
//     caught, or only the first would be (the others would see 2^64-1, ... and wrap it for good).
//   * The destructor receives dtor_info (Numba's CUDA NRT passes null).
//   * Memory comes from gpumem's device heap, not CUDA's 8 MiB malloc heap; exhaustion returns
//     null and is reported by memsys::check(), never a trap.
//
// Every function is `extern "C"`, inline and GPUMEM_HD: include this header in device code (or in
// host code on the host backend). They act on the memory system made current by nrt::launch.
// Statistics (alloc, free, mi_alloc, mi_free) are counted when the memory system has them on.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/nrt/detail/memsys_state.hpp>
#include <gpumem/nrt/detail/slab_heap.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::nrt::detail {
// Whether a count seen before an increment or decrement says the object is dead: zero, or
// "negative" (>= 2^63) because other threads' erroneous decrefs have not restored it yet.
// One comparison: before - 1 wraps zero to the top of the range.
GPUMEM_HD inline bool refcount_is_dead(std::size_t before) {
  return before - 1 >= (~std::size_t{0} >> 1);
}
}  // namespace gpumem::nrt::detail

extern "C" {

typedef void (*NRT_dtor_function)(void* data, size_t size, void* dtor_info);

// Numba's layout: {refct, dtor, dtor_info, data, size}. `refct` is a size_t accessed atomically at
// device scope (the same bytes as cuda::atomic<size_t, cuda::thread_scope_device>).
struct MemInfo {
  size_t refct;
  NRT_dtor_function dtor;
  void* dtor_info;
  void* data;
  size_t size;
};
typedef struct MemInfo NRT_MemInfo;

GPUMEM_HD inline void* NRT_Allocate(size_t size) {
  gpumem::nrt::detail::memsys_state* const ms = gpumem::nrt::detail::current_memsys();
  if (ms == nullptr) return nullptr;
  void* const p = gpumem::nrt::detail::heap_allocate(ms->heap, size);
  if (p != nullptr) gpumem::nrt::detail::count_stat(ms, gpumem::nrt::detail::stat_alloc);
  return p;
}

// Counted (statistics' `free`) only when the heap takes the free: one it refuses (not a block, a
// large block's second free, a small block's on a checked heap) is reported by check() instead.
GPUMEM_HD inline void NRT_Free(void* ptr) {
  if (ptr == nullptr) return;
  gpumem::nrt::detail::memsys_state* const ms = gpumem::nrt::detail::current_memsys();
  if (ms == nullptr) return;
  if (gpumem::nrt::detail::heap_deallocate(ms->heap, ptr))
    gpumem::nrt::detail::count_stat(ms, gpumem::nrt::detail::stat_free);
}

GPUMEM_HD inline void NRT_MemInfo_init(NRT_MemInfo* mi, void* data, size_t size,
                                       NRT_dtor_function dtor, void* dtor_info) {
  mi->refct = 1;  // not yet shared: a plain store
  mi->dtor = dtor;
  mi->dtor_info = dtor_info;
  mi->data = data;
  mi->size = size;
  gpumem::nrt::detail::memsys_state* const ms = gpumem::nrt::detail::current_memsys();
  if (ms != nullptr) gpumem::nrt::detail::count_stat(ms, gpumem::nrt::detail::stat_mi_alloc);
}

GPUMEM_HD inline NRT_MemInfo* NRT_MemInfo_new(void* data, size_t size, NRT_dtor_function dtor,
                                              void* dtor_info) {
  auto* const mi = static_cast<NRT_MemInfo*>(NRT_Allocate(sizeof(NRT_MemInfo)));
  if (mi != nullptr) NRT_MemInfo_init(mi, data, size, dtor, dtor_info);
  return mi;
}

// `align` must be a power of two; otherwise (or when the heap is exhausted) null. A `size` whose
// block (header + alignment slack + size) would pass SIZE_MAX is a failed allocation of `size`
// bytes: null, recorded for memsys::check() (out_of_memory), never a wrapped small block.
GPUMEM_HD inline NRT_MemInfo* NRT_MemInfo_alloc_aligned(size_t size, unsigned align) {
  if (align == 0 || (align & (align - 1)) != 0) return nullptr;
  size_t const header = sizeof(NRT_MemInfo);
  size_t const extra = align > alignof(NRT_MemInfo) ? align - 1 : 0;
  size_t total = 0;
  if (!gpumem::checked_add(header + extra, size, total)) {
    gpumem::nrt::detail::memsys_state* const ms = gpumem::nrt::detail::current_memsys();
    if (ms != nullptr) gpumem::nrt::detail::record_failure(ms->heap, size);
    return nullptr;
  }
  char* const block = static_cast<char*>(NRT_Allocate(total));
  if (block == nullptr) return nullptr;
  auto const start = reinterpret_cast<std::uintptr_t>(block) + header;
  auto const aligned = (start + (align - 1)) & ~static_cast<std::uintptr_t>(align - 1);
  auto* const mi = reinterpret_cast<NRT_MemInfo*>(block);
  NRT_MemInfo_init(mi, reinterpret_cast<void*>(aligned), size, nullptr, nullptr);
  return mi;
}

GPUMEM_HD inline void NRT_MemInfo_call_dtor(NRT_MemInfo* mi) {
  if (mi->dtor != nullptr) mi->dtor(mi->data, mi->size, mi->dtor_info);
  gpumem::nrt::detail::memsys_state* const ms = gpumem::nrt::detail::current_memsys();
  if (ms != nullptr) gpumem::nrt::detail::count_stat(ms, gpumem::nrt::detail::stat_mi_free);
  NRT_Free(mi);
}

GPUMEM_HD inline void NRT_incref(NRT_MemInfo* mi) {
  if (mi == nullptr) return;
  size_t const before = gpumem::atomic_fetch_add(&mi->refct, size_t{1}, gpumem::mem_order::relaxed);
  if (gpumem::nrt::detail::refcount_is_dead(before)) {
    gpumem::atomic_fetch_sub(&mi->refct, size_t{1}, gpumem::mem_order::relaxed);
    gpumem::nrt::detail::report_refcount_error(gpumem::nrt::detail::current_memsys(), mi);
  }
}

// Every erroneous step is undone by its own thread with the opposite atomic, so after any number
// of concurrent decrefs of a dead object the count is back at zero and each has been reported;
// the normal path stays one fetch_sub and one comparison. Limits, all of them caller errors: of
// several increfs of a dead object at once only the first sees zero (the next sees 1, as for a
// live object) and a decref that meets such a 1 before the undo destroys the object again; the
// first incref is always reported.
GPUMEM_HD inline void NRT_decref(NRT_MemInfo* mi) {
  if (mi == nullptr) return;
  size_t const before = gpumem::atomic_fetch_sub(&mi->refct, size_t{1}, gpumem::mem_order::acq_rel);
  if (before == 1) {
    NRT_MemInfo_call_dtor(mi);
  } else if (gpumem::nrt::detail::refcount_is_dead(before)) {
    gpumem::atomic_fetch_add(&mi->refct, size_t{1}, gpumem::mem_order::relaxed);
    gpumem::nrt::detail::report_refcount_error(gpumem::nrt::detail::current_memsys(), mi);
  }
}

GPUMEM_HD inline void* NRT_MemInfo_data_fast(NRT_MemInfo* mi) {
  return mi->data;
}

}  // extern "C"
