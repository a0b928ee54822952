// gpumem/manager/context.hpp
//
// A context: gpumem's per-device state — the device ordinal, the memory manager bound to it for
// its whole life, the deferred-deallocation queue of memory (pending_deallocations) and the
// separate queue of stream/event releases (pending_resource_releases). The counterpart of
// Numba's Context.
//
//   context& ctx = current_context();          // created on first use for the current device
//   memory_pointer p = ctx.memory_manager().memalloc(1 << 20);
//
// Choosing the memory manager:
//   * set_memory_manager(factory) — checks the plugin's interface version AT ONCE (it constructs
//     one instance on a detached probe context, reads interface_version(), discards it; a
//     mismatch throws logic_error "... has version 2 - version 1 required"), then affects
//     contexts created afterwards. An empty factory returns to the environment's choice.
//   * otherwise GPUMEM_MEMORY_MANAGER (see memory_manager_registry.hpp): a built-in name or a
//     shared library; resolved when the first context is created; an invalid value is an error
//     naming it.
//   * close() destroys every context (flushing its queues), so the next current_context() binds
//     a new manager. Pointers that outlive close() stay valid and are freed when their last
//     owner goes, but their owning_context() reference is invalid.
//
// Ownership: the process table owns the contexts; references stay valid until close(). The queues
// are shared with the finalizers of outstanding pointers (so a late free still works).
// Thread safety: current_context(), set_memory_manager() and close() are serialised by one
// (recursive) mutex (looking up an existing context of devices 0-63 takes no lock); close() must
// not race with threads still using the contexts it destroys. The queues and the managers are
// thread safe themselves.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <atomic>

#include <memory>
#include <string>

namespace gpumem {

// Why a context ends (see close(device) and close_for_device_reset(device)): its manager is
// retired while the device's CUDA context lives on, or that CUDA context is about to be reset
// under gpumem, which frees every allocation in it.
enum class context_end { retire, device_reset };

class context;
namespace detail {
// Destroys a context that has left the process table, telling its manager why (context.cpp).
void end_context(std::unique_ptr<context> doomed, context_end why) noexcept;
}  // namespace detail

class context {
 public:
  // A context outside the process table (tests, embedders): binds `factory(*this)` and calls
  // initialize(). The caller owns it. Queue limits come from the environment and the device's
  // total memory.
  context(int device, memory_manager_factory const& factory);
  context(context const&) = delete;
  context& operator=(context const&) = delete;
  // Flushes both queues (regardless of deferral), then destroys the memory manager.
  ~context();

  int device() const noexcept { return device_; }
  device_identity identity() const;
  // Makes this context's device the current one of the calling thread.
  void make_current() const;

  // The bound manager. Throws logic_error on the probe context of set_memory_manager (which has
  // none).
  gpumem::memory_manager& memory_manager() const;
  gpumem::pending_deallocations& pending_deallocations() const noexcept { return *deallocations_; }
  gpumem::pending_deallocations& pending_resource_releases() const noexcept {
    return *resource_releases_;
  }
  // The queue by shared ownership, for finalizers that may run after the context is gone.
  std::shared_ptr<gpumem::pending_deallocations> shared_pending_deallocations() const noexcept {
    return deallocations_;
  }
  std::shared_ptr<gpumem::pending_deallocations> shared_pending_resource_releases() const noexcept {
    return resource_releases_;
  }
  // How this context is ending: read by the manager's destructor (retire until a close says
  // otherwise).
  context_end ending() const noexcept { return ending_; }
  // Set once this context has ended for a device reset (close_for_device_reset), shared with the
  // releases of its memory, which may run later: after the reset they make no device call.
  std::shared_ptr<std::atomic<bool> const> shared_device_reset_flag() const noexcept {
    return device_reset_;
  }

 private:
  struct probe_tag {};
  context(int device, probe_tag);
  friend void check_memory_manager_version(memory_manager_factory const& factory,
                                           std::string const& what);
  friend void detail::end_context(std::unique_ptr<context> doomed, context_end why) noexcept;

  int device_;
  std::shared_ptr<gpumem::pending_deallocations> deallocations_;
  std::shared_ptr<gpumem::pending_deallocations> resource_releases_;
  std::unique_ptr<gpumem::memory_manager> manager_;
  context_end ending_ = context_end::retire;
  std::shared_ptr<std::atomic<bool>> device_reset_ = std::make_shared<std::atomic<bool>>(false);
};

// The context of the calling thread's current device; created on first use.
context& current_context();
// The context of `device` (created on first use); does not change the current device. While it is
// being created, its manager's factory and initialize() get logic_error asking for it here (they
// have owning_context()).
context& get_context(int device);
// The context of `device` if one exists, else null: creates nothing (for code that only gives back
// what an existing manager may hold, such as a stream it saw). The same thread rule as
// get_context: the context lives until close() or close(device).
context* find_context(int device) noexcept;

// Sets the factory for contexts created from now on (see the file comment).
void set_memory_manager(memory_manager_factory factory);
// The factory new contexts use now (set_memory_manager's, or the environment's).
memory_manager_factory current_memory_manager_factory();

// Destroys every context of the process table.
void close();
// Destroys the context of `device` only (if it exists), flushing its queues; the next
// get_context(device) makes a new one with the current factory. For a device whose CUDA context
// was (or is about to be) reset under gpumem (Numba's cuda.close() resets the primary context):
// no later allocation is served from the old manager. Pointers that outlive it are freed by their
// own finalizers; a free into a destroyed CUDA context is logged, never thrown. Same thread rule
// as close(): no other thread may still use that context object.
void close(int device);
// close(device) for a device whose CUDA context is about to be reset under gpumem (Numba's
// cuda.close(): the EMM plugin's reset(), then cuDevicePrimaryCtxReset). Everything the manager
// can release goes at once, while the context lives (the queue is flushed; a pool gives back every
// chunk without a live block and destroys its events and streams). Memory still live is left to
// the reset: its later frees make no device call at all (the reset frees it, and a free by address
// afterwards could free memory of the next context at a reused address). If the context is NOT
// reset after all (Numba's ctx.reset() alone), that memory stays valid and is never reused or
// given back: leaked until the process ends. Same thread rule as close().
void close_for_device_reset(int device);

// Checks a manager's interface version: constructs one on a detached probe context and throws
// logic_error "memory manager <what> (<name>): EMM Plugin interface has version N - version 1
// required" if it differs, and logic_error naming <what> (with the message of what was thrown)
// when the factory, the constructor, interface_version() or name() throws something other than a
// gpumem::error (which passes as it is). `what` names the source (a plugin path, a built-in name,
// "set_memory_manager").
void check_memory_manager_version(memory_manager_factory const& factory, std::string const& what);

}  // namespace gpumem
