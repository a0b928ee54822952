// gpumem/nrt/memsys.hpp
//
// memsys: one NRT memory system — a device heap, the statistics Numba's NRT keeps (alloc, free,
// mi_alloc, mi_free), and the error words of the reference counting. Kernels that use the NRT C
// API (nrt/meminfo.hpp) or nrt::ref are launched with nrt::launch(ms, config, f) (nrt/launch.hpp),
// which makes `ms` the memory system those calls act on.
//
//   nrt::memsys ms(nrt::heap_options{64 * MiB}, nrt::memsys_options{true});
//   nrt::launch(ms, {grid, block}, [=] GPUMEM_HD (thread_index const& t) { ... NRT_Allocate ... });
//   ms.check();                       // out_of_memory / logic_error for what the kernels recorded
//   auto s = ms.statistics();         // s.alloc == s.free && s.mi_alloc == s.mi_free: no leak
//
// Statistics: counted in device memory, sharded (one 32-byte sector per shard, warp-aggregated
// adds) so that they do not serialise the allocation path. They can be switched on and off at run
// time; reading them while off is a logic_error (numbers from a partly counted run would lie).
// Switching does not reset them; reset_statistics() does.
//
// Ownership: owns its heap and its state (device memory from the current memory manager).
// Destroy it only when no kernel uses it. Thread safety: host methods synchronise the device and
// must not race with each other.
#pragma once

#include <gpumem/nrt/detail/memsys_state.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <cstdint>
#include <memory>

namespace gpumem::nrt {

struct memsys_options {
  bool statistics = false;
};

struct memsys_statistics {
  std::uint64_t alloc = 0;  // NRT_Allocate (and the blocks under meminfos) that succeeded
  // NRT_Free that the heap took: not a refused one (reported by check()); an unchecked heap takes
  // a small block's second free (heap_options::check_frees), a cuda_malloc heap every pointer.
  std::uint64_t free = 0;
  std::uint64_t mi_alloc = 0;  // NRT_MemInfo_init
  std::uint64_t mi_free = 0;   // meminfos destroyed (NRT_MemInfo_call_dtor)
  bool balanced() const noexcept { return alloc == free && mi_alloc == mi_free; }
};

class memsys {
 public:
  explicit memsys(heap_options heap = {}, memsys_options options = {});
  memsys(memsys const&) = delete;
  memsys& operator=(memsys const&) = delete;
  ~memsys();

  device_heap& heap() noexcept { return *heap_; }
  // The device state kernels reach through nrt::launch.
  detail::memsys_state* state() const noexcept { return state_; }
  // Unique for the life of the process (never reused by a later memsys at the same address).
  std::uint64_t id() const noexcept { return id_; }

  void enable_statistics();
  void disable_statistics();
  bool statistics_enabled() const noexcept { return statistics_enabled_; }
  // Synchronises and sums the shards. Throws logic_error while statistics are off.
  memsys_statistics statistics();
  void reset_statistics();

  // Synchronises; throws logic_error when a kernel decref'd (or incref'd) a meminfo whose count
  // was zero (naming how many and the first meminfo), then the heap's check(). Clears what it
  // reports.
  void check();

 private:
  std::unique_ptr<device_heap> heap_;
  memory_pointer memory_;
  detail::memsys_state* state_ = nullptr;
  std::uint32_t stat_shards_ = 0;
  bool statistics_enabled_ = false;
  std::uint64_t id_ = 0;
};

}  // namespace gpumem::nrt
