// gpumem/nrt/detail/memsys_state.hpp
//
// The device-memory state of one NRT memory system (the host owner is gpumem::nrt::memsys): the
// heap handle, the statistics shards, the switch that turns statistics on and off, and the error
// words device code raises (a decref or incref at zero).
//
// The "current" memory system, which the NRT C API (NRT_Allocate, ...) uses because its functions
// take no heap argument, is reached through current_memsys():
//   * device: a __device__ pointer of the calling module. gpumem compiles CUDA code without
//     relocatable device code, so each translation unit is its own module with its own copy;
//     nrt::launch() (nrt/launch.hpp) sets the copy of the module that launches, in stream order.
//     Everything here is in an unnamed namespace so that the variable and the kernels that read it
//     are always the same translation unit's.
//   * host backend: a thread-local pointer that nrt::launch sets around each simulated thread, so
//     concurrent grids with different memory systems never see each other's.
#pragma once

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/warp.hpp>
#include <gpumem/nrt/detail/slab_heap.hpp>

#include <cstdint>

namespace gpumem::nrt::detail {

enum stat_index : unsigned { stat_alloc = 0, stat_free = 1, stat_mi_alloc = 2, stat_mi_free = 3 };
inline constexpr unsigned stat_count = 4;

struct memsys_state {
  heap_ref heap;
  // [stat_shards][stat_count]; one 32-byte sector per shard, so shards never share an atomic unit.
  unsigned long long* stats;
  std::uint32_t stat_shards;
  std::uint32_t statistics_enabled;
  unsigned long long refcount_errors;    // decref or incref that found the count at zero
  unsigned long long first_bad_meminfo;  // address of the first such meminfo
};

// The calling host thread's current memory system (host backend); defined in src/nrt/memsys.cpp.
memsys_state*& host_current_memsys() noexcept;

// Counts one event per calling lane, one atomic per warp.
GPUMEM_HD inline void count_stat(memsys_state* ms, stat_index which) {
  if (atomic_load(&ms->statistics_enabled, mem_order::relaxed) == 0) return;
  unsigned const active = warp::active_mask();
  if (warp::lane_id() == warp::lowest_lane(active)) {
    std::uint32_t const shard = shard_hint() % ms->stat_shards;
    atomic_fetch_add(&ms->stats[shard * stat_count + which],
                     static_cast<unsigned long long>(warp::popcount(active)), mem_order::relaxed);
  }
}

GPUMEM_HD inline void report_refcount_error(memsys_state* ms, void const* meminfo) {
  if (ms == nullptr) return;
  atomic_fetch_add(&ms->refcount_errors, 1ull, mem_order::relaxed);
  unsigned long long expected = 0;
  atomic_compare_exchange(
      &ms->first_bad_meminfo, expected,
      static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(meminfo)),
      mem_order::relaxed);
}

namespace {
#if defined(__CUDACC__)
__device__ memsys_state* device_current_memsys = nullptr;
#endif

GPUMEM_HD inline memsys_state* current_memsys() {
#if GPUMEM_DEVICE_PASS
  return device_current_memsys;
#else
  return host_current_memsys();
#endif
}
}  // namespace

}  // namespace gpumem::nrt::detail
