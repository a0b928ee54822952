// gpumem/manager/host_only_memory_manager.hpp
//
// A partial memory manager for plugins whose allocator manages device memory only (the spec's
// HostOnlyCUDAMemoryManager). It implements
//   * memhostalloc / mempin: pinned and mapped host memory through the backend; unpinning and
//     freeing go through the context's deferred-deallocation queue (pending_deallocations), with
//     the pinned size counted towards the byte limit;
//   * memallocmanaged: managed memory through the backend, freed through the same queue
//     (override it if the plugin's allocator provides managed memory);
//   * reset(): flushes the queue; defer_cleanup(): a guard that defers the queue.
// A plugin derives from it and implements memalloc, get_ipc_handle (or mixes in ipc_mixin),
// get_memory_info, interface_version and name.
//
// Rules for subclasses (as the spec's): an override of reset() must call
// host_only_memory_manager::reset(); an override of defer_cleanup() must hold the guard from
// host_only_memory_manager::defer_cleanup() (cleanup_guard::chain composes them).
//
// Thread safety: no state of its own beyond the context's queue, which is thread safe.
#pragma once

#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <functional>
#include <memory>

namespace gpumem {

class host_only_memory_manager : public memory_manager {
 public:
  using memory_manager::memory_manager;

  host_memory memhostalloc(std::size_t bytes, host_alloc_flags flags) override;
  host_memory mempin(std::shared_ptr<void> owner, void* ptr, std::size_t bytes,
                     bool mapped) override;
  managed_memory memallocmanaged(std::size_t bytes, bool attach_global) override;
  // Nothing to prepare; safe to call any number of times.
  void initialize() override {}
  void reset() override;
  cleanup_guard defer_cleanup() override;

 protected:
  // A finalizer that queues `release` (freeing `bytes`) on the owning context's deferred queue.
  // The queue is captured by shared ownership, so the finalizer stays valid after the context is
  // closed (it then releases at once).
  std::function<void()> deferred_release(std::function<void()> release, std::size_t bytes) const;
};

}  // namespace gpumem
