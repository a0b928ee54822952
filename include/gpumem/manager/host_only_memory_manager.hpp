// gpumem/manager/host_only_memory_manager.hpp
//
// A partial memory manager for plugins whose allocator manages device memory only (the spec's
// HostOnlyCUDAMemoryManager). It implements
//   * memhostalloc: pinned and mapped host memory through the backend, freed through the
//     context's deferred-deallocation queue (pending_deallocations), with the size counted towards
//     the byte limit;
//   * mempin: pins existing host memory; unpinned AT ONCE when the last owner goes (as Numba's
//     _pin_finalizer: a pinned or mapped scope may pin the same range again right after);
//   * memallocmanaged: managed memory through the backend, freed through the same queue
//     (override it if the plugin's allocator provides managed memory);
//   * reset(): flushes the queue; defer_cleanup(): a guard that defers the queue;
//   * allocate_device / device_release (protected): device memory straight from the backend, for
//     managers that take it from there (gpumem's "default" and "host_only" built-ins, plugins).
//     With GPUMEM_DEBUG_MEMORY on when the manager was made, it goes through the debug adaptor
//     (tracking_adaptor over cuda_resource): double and wrong-size frees are caught, freed memory
//     is poisoned, debug_tracker() reports what is outstanding.
// Once its context has ended for a device reset (close_for_device_reset), the releases of what it
// handed out make no device call (unless_device_reset): the reset took that memory.
// A plugin derives from it and implements memalloc, get_ipc_handle (or mixes in ipc_mixin),
// get_memory_info, interface_version and name.
//
// Rules for subclasses (as the spec's): an override of reset() must call
// host_only_memory_manager::reset(); an override of defer_cleanup() must hold the guard from
// host_only_memory_manager::defer_cleanup() (cleanup_guard::chain composes them).
//
// Thread safety: no mutable state of its own beyond the context's queue and the debug adaptor,
// both thread safe.
#pragma once

#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

namespace gpumem {

class tracking_adaptor;

class host_only_memory_manager : public memory_manager {
 public:
  // Reads GPUMEM_DEBUG_MEMORY (no device work: see memory_manager.hpp).
  explicit host_only_memory_manager(context& owner);
  ~host_only_memory_manager() override;

  host_memory memhostalloc(std::size_t bytes, host_alloc_flags flags) override;
  host_memory mempin(std::shared_ptr<void> owner, void* ptr, std::size_t bytes,
                     bool mapped) override;
  managed_memory memallocmanaged(std::size_t bytes, bool attach_global) override;
  // Nothing to prepare; safe to call any number of times.
  void initialize() override {}
  void reset() override;
  cleanup_guard defer_cleanup() override;

  // The debug adaptor this manager's device memory goes through (GPUMEM_DEBUG_MEMORY), or null.
  // Shared with the finalizers of the pointers it handed out, so it outlives the manager.
  virtual tracking_adaptor* debug_tracker() const noexcept { return device_debug_.get(); }

 protected:
  // `bytes` (> 0) of device memory of the owning context's device (made current for the call),
  // from backend().allocate or through the debug adaptor; gpumem::out_of_memory when there is none
  // (retrying is the caller's policy).
  void* allocate_device(std::size_t bytes);
  // The release of what allocate_device returned, for a finalizer (on the context's device; it
  // shares what it needs, never `this`). Call it at most once per allocation.
  std::function<void()> device_release(void* ptr, std::size_t bytes) const;

  // A finalizer that queues `release` (freeing `bytes`) on the owning context's deferred queue.
  // The queue is captured by shared ownership, so the finalizer stays valid after the context is
  // closed (it then releases at once).
  std::function<void()> deferred_release(std::function<void()> release, std::size_t bytes) const;

  // `release` (a backend call freeing, unpinning or unmapping something of this context), made a
  // no-op once the context has ended for a device reset (close_for_device_reset): the reset takes
  // the memory with it, and a call by address afterwards could free or unpin what the next context
  // placed at the same address. Every release above goes through it; a plugin's own releases of
  // backend memory should too.
  std::function<void()> unless_device_reset(std::function<void()> release) const;

  // Out of memory in memallocmanaged (managed memory is the device's): what the manager keeps
  // that could serve the retry is given back, after the deferred frees were flushed. Default:
  // nothing. resource_memory_manager runs its on_out_of_memory hook (a pool trims).
  virtual bool release_for_retry(std::size_t bytes);

 private:
  std::shared_ptr<tracking_adaptor> device_debug_;  // null unless GPUMEM_DEBUG_MEMORY
  // The context's: set once it has ended with context_end::device_reset; shared with every
  // release made by unless_device_reset, which may outlive the manager.
  std::shared_ptr<std::atomic<bool> const> device_reset_;
};

// The debug adaptor of `manager` (host_only_memory_manager::debug_tracker()), or null: debugging
// off, or a manager not built on host_only_memory_manager.
tracking_adaptor* debug_tracker(memory_manager const& manager) noexcept;

}  // namespace gpumem
