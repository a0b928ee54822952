// gpumem/manager/memory_manager.hpp
//
// The External Memory Management (EMM) plugin interface: the C++ counterpart of Numba's
// BaseCUDAMemoryManager. gpumem makes every device, pinned, mapped and managed allocation of a
// context through that context's memory manager; a plugin (a class deriving from memory_manager,
// usually through host_only_memory_manager) hands device memory to another allocator.
//
// Life cycle and rules for implementers:
//   * One instance per context, created when the context is created and destroyed with it;
//     owning_context() is that context.
//   * The constructor must not allocate or touch the device: set_memory_manager() constructs one
//     instance on a detached probe context only to read interface_version(), then discards it.
//     Work belongs in initialize().
//   * initialize() is called before the first use, may be called many times, and must not
//     invalidate earlier state.
//   * reset() may be called before initialize().
//   * The constructor and initialize() run with the context's device current, and so do the
//     allocation methods when Numba or gpumem's bridges call them. A C++ caller of
//     get_context(d).memory_manager() may have another device current: the built-in managers and
//     host_only_memory_manager's helpers select the context's device themselves, and a plugin
//     should too (owning_context().device()). Allocation methods return pointer types whose
//     finalizers capture shared state, never `this` (pointers may outlive the manager).
//   * get_memory_info() throws gpumem::not_supported where the allocator cannot tell (a pool).
//   * defer_cleanup() returns a guard; the plugin documents what deferral means for it.
//   * interface_version() returns memory_manager_interface_version (1).
//   * Out of memory is gpumem::out_of_memory, after the manager's own recovery (flush, retry once).
//
// Thread safety: every method may be called from any thread; implementations state how they make
// that true. Stream semantics: the EMM interface is synchronous (as the spec's version 1): memory
// from memalloc is usable by any stream once memalloc returns; a finalizer may run on any thread,
// and the memory must not be in use by device work at that point (the array layer synchronises).
//
// Beyond the EMM (for frameworks that pass a stream: CuPy, PyTorch), virtuals with safe
// defaults, so existing plugins keep working:
//   * allocate(bytes, stream): memory for work on `stream`, freed ON `stream` when the returned
//     pointer's last owner goes (the caller promises that no other stream uses it by then without
//     ordering itself after `stream`). Default: memalloc(bytes), whose synchronous semantics
//     satisfy the stream-ordered contract. resource_memory_manager allocates on the stream; a
//     block of the per-thread default stream that another thread frees (the handle names that
//     thread's own stream there) goes through the deferred queue instead.
//   * release_stream(stream): the caller is about to destroy `stream`; a manager that keeps memory
//     per stream (the pool) gives it back first. Default: nothing to do.
//   * get_memory_statistics(): one memory_statistics snapshot. Default: the context's queue only.
//   * unowned() / allocate_unowned(bytes, stream): allocate() without an owner object, for C
//     interfaces that give the pointer, size and stream back at the free. Default: none.
//   * memalloc_unowned(bytes): memalloc() without an owner object, freed through
//     unowned()->deallocate_deferred(ptr, bytes) (the Python bridges keep the owner themselves).
//     Default: none.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/cleanup_guard.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/ipc_handle.hpp>
#include <gpumem/manager/memory_pointer.hpp>
#include <gpumem/manager/memory_statistics.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace gpumem {

class context;

// The version of the interface this gpumem implements; plugins return it from
// interface_version().
inline constexpr int memory_manager_interface_version = 1;

// The shared state that frees a manager's unowned blocks (memory_manager::allocate_unowned). It
// outlives the manager while anyone holds it (shared_from_this gives the owning pointer), so a
// block freed after its context was closed still goes back where it came from.
class unowned_blocks : public std::enable_shared_from_this<unowned_blocks> {
 public:
  virtual ~unowned_blocks() = default;
  // Frees a block of allocate_unowned(bytes, stream) on `stream`. Never throws (errors are
  // logged). May run after the manager is gone.
  virtual void deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept = 0;
  // Frees a block of memalloc_unowned(bytes) as memalloc's memory is freed: device work on any
  // stream may still use it, so it may be reused only after a device synchronisation (the
  // resource_memory_manager queues it on its context's deferred-deallocation queue). Never throws
  // (errors are logged). May run after the manager is gone.
  virtual void deallocate_deferred(void* ptr, std::size_t bytes) noexcept = 0;
};

// Whether the owner of a block allocated on `stream` (memory_manager::allocate, allocate_unowned)
// must free it through the deferred path rather than on the stream: when the stream is the
// per-thread default stream and another thread frees the block, that handle names the freeing
// thread's own stream, not the one the block was used on, so the free waits for the device (as
// deallocate_deferred) instead. Made by the allocating thread; default: always on the stream.
class per_thread_stream_owner {
 public:
  per_thread_stream_owner() noexcept = default;
  explicit per_thread_stream_owner(stream_handle stream) {
    if (stream == backend().per_thread_default_stream()) thread_ = std::this_thread::get_id();
  }
  bool freed_by_another_thread() const noexcept {
    return thread_ != std::thread::id() && thread_ != std::this_thread::get_id();
  }

 private:
  std::thread::id thread_;  // the allocating thread, for the per-thread default stream; else none
};

class memory_manager {
 public:
  explicit memory_manager(context& owner) noexcept : context_(&owner) {}
  memory_manager(memory_manager const&) = delete;
  memory_manager& operator=(memory_manager const&) = delete;
  virtual ~memory_manager() = default;

  // Device memory of `bytes` bytes (0 bytes: a null pointer of size 0 that owns nothing to free).
  virtual memory_pointer memalloc(std::size_t bytes) = 0;
  // Pinned host memory, mapped into the device address space when `flags.mapped`.
  virtual host_memory memhostalloc(std::size_t bytes, host_alloc_flags flags) = 0;
  // Pins [ptr, ptr + bytes), which `owner` keeps alive; the result keeps `owner` alive until the
  // range is unpinned. The range must be unpinned AT ONCE when the result's last owner goes (not
  // deferred, not even inside defer_cleanup(): Numba's _pin_finalizer), so that the caller may pin
  // it again right after (pinned/mapped scopes).
  virtual host_memory mempin(std::shared_ptr<void> owner, void* ptr, std::size_t bytes,
                             bool mapped) = 0;
  // Managed memory; `attach_global` as cudaMemAttachGlobal (else cudaMemAttachHost).
  virtual managed_memory memallocmanaged(std::size_t bytes, bool attach_global) = 0;
  virtual void initialize() = 0;
  virtual ipc_handle get_ipc_handle(memory_pointer const& memory) = 0;
  virtual memory_info get_memory_info() = 0;
  // Releases everything the manager holds back (pending frees, cached blocks). Memory still owned
  // by live pointers is not freed (that would leave them dangling).
  virtual void reset() = 0;
  virtual cleanup_guard defer_cleanup() = 0;
  virtual int interface_version() const = 0;
  // A short name for messages and statistics ("default", "pool over cuda_resource", ...).
  virtual std::string name() const = 0;

  // Stream-ordered device memory (see the file comment); 0 bytes gives a null pointer.
  virtual memory_pointer allocate(std::size_t bytes, stream_handle stream);
  // Called before `stream` is destroyed; must not throw for a stream the manager never saw.
  virtual void release_stream(stream_handle stream);
  virtual memory_statistics get_memory_statistics() const;
  // Stream-ordered memory WITHOUT an owner object, for C interfaces that pass the pointer, size
  // and stream back when they free (PyTorch's pluggable allocator): as allocate(bytes, stream)
  // (counted, the same out-of-memory recovery), freed by unowned()->deallocate(ptr, bytes,
  // stream). unowned() is null where the manager has no such path (the default: then use
  // allocate()); allocate_unowned then throws not_supported. 0 bytes gives null.
  virtual unowned_blocks* unowned() const noexcept { return nullptr; }
  virtual void* allocate_unowned(std::size_t bytes, stream_handle stream);
  // memalloc(bytes) WITHOUT an owner object (the same memory, counted and recovered alike), freed
  // by unowned()->deallocate_deferred(ptr, bytes). A manager whose unowned() is non-null provides
  // it; otherwise (the default) it throws not_supported. 0 bytes gives null.
  virtual void* memalloc_unowned(std::size_t bytes);

  context& owning_context() const noexcept { return *context_; }

 private:
  context* context_;
};

// Makes the memory manager of a new context. Called once per context, with the context.
using memory_manager_factory = std::function<std::unique_ptr<memory_manager>(context&)>;

}  // namespace gpumem
