// gpumem/nrt/device_heap.hpp
//
// device_heap: gpumem's in-kernel allocator, owned from the host. Kernels receive `handle()` (a
// small trivially copyable heap_ref) by value and call nrt::allocate / nrt::deallocate on it
// (nrt/detail/slab_heap.hpp describes the algorithm), or go through the NRT C API of a memsys.
//
//   nrt::device_heap heap(nrt::heap_options{512 * MiB});  // memory from the current manager
//   nrt::heap_ref h = heap.handle();
//   gpumem::launch(cfg, [=] GPUMEM_HD(gpumem::thread_index const& t) {
//     void* p = nrt::allocate(h, 64);  // null when exhausted, never a trap
//     ...
//     nrt::deallocate(h, p);
//   });
//   heap.check();  // throws out_of_memory if any allocation in those kernels returned null
//
// (A GPUMEM_HD lambda needs nvcc's --extended-lambda, which the gpumem::gpumem target brings; a
// named functor with a GPUMEM_HD operator() needs nothing.)
//
// Sizing: `bytes` (0 = GPUMEM_DEVICE_HEAP_SIZE, 256 MiB by default) is the whole region: the
// metadata (a bitmap, two words per slab, the slots) is carved from its front, the rest is slabs.
// heap_kind::cuda_malloc serves blocks from CUDA's in-kernel malloc instead (sized to `bytes` via
// cudaLimitMallocHeapSize; std::malloc on the host backend), for comparison.
//
// Ownership: the heap owns its region (a memory_pointer from the current context's memory manager)
// unless it was given caller memory, which must outlive it. Blocks still allocated when the heap
// is destroyed vanish with it.
// Thread safety: device-side allocate/deallocate are lock-free and may be called by any number of
// threads of any number of concurrent kernels. The host methods synchronise the device first (they
// read what kernels wrote) and must not race with each other; trim() needs a quiescent heap.
#pragma once

#include <gpumem/core/units.hpp>
#include <gpumem/manager/memory_pointer.hpp>
#include <gpumem/nrt/detail/slab_heap.hpp>

#include <cstddef>
#include <string>

namespace gpumem::nrt {

using heap_ref = detail::heap_ref;

struct heap_options {
  std::size_t bytes = 0;  // 0: GPUMEM_DEVICE_HEAP_SIZE
  heap_kind kind = heap_kind::gpumem;
  std::size_t slab_bytes = 128 * KiB;  // a power of two, at least 64 KiB
  unsigned shards = 0;                 // slot shards; 0: from the size (1..128)
  // Report a second free of a small block too (device_heap::check() throws logic_error for it):
  // one bit per 16 bytes of slab, taken from the region (1/128 of it), and an atomic per free. On
  // whenever GPUMEM_DEBUG_MEMORY=1.
  bool check_frees = false;
};

struct heap_usage {
  std::size_t used_bytes = 0;  // slabs held (small-class slabs count whole)
  std::size_t peak_bytes = 0;
  std::size_t capacity_bytes = 0;
};

// Device-side allocation (GPUMEM_HD: kernels, and the same code on the host backend). A block of
// at least `bytes` from the heap `h` names (heap_kind::gpumem: aligned to its size class up to
// 256 bytes, as the slabs start 256-byte aligned; at a multiple of its class inside its slab), or
// null when the heap cannot serve the request, which is recorded for
// device_heap::check() (out_of_memory) — never a trap. Lock-free; any thread of any kernel.
GPUMEM_HD inline void* allocate(heap_ref h, std::size_t bytes) {
  return detail::heap_allocate(h, bytes);
}
// Gives back a block that allocate() returned from the same heap; null is ignored. A pointer
// outside the heap or inside a block, a large block freed twice, and (on a heap made with
// heap_options::check_frees) a small block freed twice change nothing and are reported by
// device_heap::check() (logic_error).
GPUMEM_HD inline void deallocate(heap_ref h, void* p) {
  detail::heap_deallocate(h, p);
}

class device_heap {
 public:
  // Region from gpumem::current_context().memory_manager().memalloc(bytes).
  explicit device_heap(heap_options options = {});
  // Region [base, base + bytes) owned by the caller (device memory, 256-byte aligned).
  device_heap(void* base, std::size_t bytes, heap_options options = {});
  device_heap(device_heap const&) = delete;
  device_heap& operator=(device_heap const&) = delete;
  ~device_heap();

  heap_ref handle() const noexcept { return ref_; }
  heap_kind kind() const noexcept { return ref_.kind; }
  // Bytes that blocks can occupy (the slabs; for cuda_malloc the malloc heap size).
  std::size_t capacity() const noexcept;
  std::size_t slab_bytes() const noexcept { return std::size_t{1} << ref_.slab_shift; }
  unsigned shards() const noexcept { return ref_.shard_count; }
  // "gpumem device heap (256 MiB)" / "cuda malloc heap (256 MiB)".
  std::string name() const;

  // Synchronises, then reports what kernels recorded since the last check, and clears it:
  // gpumem::out_of_memory (requested = the first failing size, allocator = name()) when any
  // allocation returned null; gpumem::logic_error when a free was refused (deallocate()).
  void check();
  // Synchronises and reads the slab counters (zeros for cuda_malloc, which does not say).
  heap_usage usage();
  // With no kernel using the heap: gives back every slot's current slab that holds no live block,
  // so that the whole capacity is free again (large blocks can use it).
  void trim();

 private:
  void build(heap_options const& options);

  memory_pointer memory_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  heap_ref ref_{};
};

}  // namespace gpumem::nrt
