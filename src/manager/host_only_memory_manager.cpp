#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"

#include <cstdint>
#include <string>

namespace gpumem {

host_only_memory_manager::host_only_memory_manager(context& owner)
    : memory_manager(owner), device_reset_(owner.shared_device_reset_flag()) {
  if (debug_memory_enabled())
    device_debug_ = make_shared_tracking_adaptor(std::make_shared<cuda_resource>());
}

host_only_memory_manager::~host_only_memory_manager() = default;

std::function<void()> host_only_memory_manager::unless_device_reset(
    std::function<void()> release) const {
  return [reset = device_reset_, release = std::move(release)] {
    if (!reset->load()) release();
  };
}

void* host_only_memory_manager::allocate_device(std::size_t bytes) {
  // On the context's device even when a caller has another one current (get_context(d) used
  // directly from C++): the memory must be the context's.
  detail::scoped_device on_device(owning_context().device());
  return device_debug_ ? device_debug_->allocate(bytes, nullptr) : backend().allocate(bytes);
}

std::function<void()> host_only_memory_manager::device_release(void* ptr, std::size_t bytes) const {
  int const device = owning_context().device();
  if (device_debug_) {
    return unless_device_reset([tracker = device_debug_, ptr, bytes, device] {
      detail::scoped_device d(device);
      tracker->deallocate(ptr, bytes, nullptr);
    });
  }
  return unless_device_reset([ptr, device] {
    detail::scoped_device d(device);
    backend().deallocate(ptr);
  });
}

tracking_adaptor* debug_tracker(memory_manager const& manager) noexcept {
  auto const* base = dynamic_cast<host_only_memory_manager const*>(&manager);
  return base == nullptr ? nullptr : base->debug_tracker();
}

std::function<void()> host_only_memory_manager::deferred_release(std::function<void()> release,
                                                                 std::size_t bytes) const {
  std::shared_ptr<pending_deallocations> queue = owning_context().shared_pending_deallocations();
  return [queue = std::move(queue), release = std::move(release), bytes]() mutable {
    queue->enqueue(std::move(release), bytes);
  };
}

host_memory host_only_memory_manager::memhostalloc(std::size_t bytes, host_alloc_flags flags) {
  context& ctx = owning_context();
  if (bytes == 0) {
    if (flags.mapped) return mapped_memory(ctx, nullptr, nullptr, 0);
    return pinned_memory(ctx, nullptr, 0);
  }
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  void* const host = detail::allocate_with_retry(
      ctx, bytes, [&] { return backend().allocate_pinned(bytes, flags); });
  auto release = unless_device_reset([host, device] {
    detail::scoped_device d(device);
    backend().deallocate_pinned(host);
  });
  if (!flags.mapped) return pinned_memory(ctx, host, bytes, deferred_release(release, bytes));
  void* device_ptr = nullptr;
  try {
    device_ptr = backend().mapped_device_pointer(host);
  } catch (...) {
    backend().deallocate_pinned(host);
    throw;
  }
  return mapped_memory(ctx, host, device_ptr, bytes, deferred_release(release, bytes));
}

host_memory host_only_memory_manager::mempin(std::shared_ptr<void> owner, void* ptr,
                                             std::size_t bytes, bool mapped) {
  GPUMEM_EXPECTS(ptr != nullptr && bytes > 0, "mempin: nothing to pin (pointer " +
                                                  std::string(ptr ? "non-null" : "null") + ", " +
                                                  std::to_string(bytes) + " bytes)");
  std::size_t end = 0;
  GPUMEM_EXPECTS(checked_add(reinterpret_cast<std::uintptr_t>(ptr), bytes, end),
                 "mempin: the range of " + std::to_string(bytes) + " bytes at address " +
                     std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                     " wraps the address space");
  context& ctx = owning_context();
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  detail::allocate_with_retry(ctx, bytes, [&] {
    backend().register_host(ptr, bytes, mapped, /*portable=*/false);
    return 0;
  });
  // Unpinned AT ONCE when the last owner goes, not through the deferred queue: Numba's
  // _pin_finalizer unregisters immediately, and its callers (cuda.pinned / cuda.mapped scopes)
  // may pin the same range again right after, which a queued unpin would make fail ("already
  // registered"). Memory freed by the caller afterwards is the caller's own, so nothing is gained
  // by deferring. The finalizer holds `owner`, so the range stays valid until it is unpinned; a
  // failed unregister (a reset context) is logged by the pointer's owner record, never thrown.
  auto unpin = unless_device_reset([owner, ptr, device] {
    detail::scoped_device d(device);
    backend().unregister_host(ptr);
  });
  if (!mapped) return pinned_memory(ctx, ptr, bytes, unpin, owner);
  void* device_ptr = nullptr;
  try {
    device_ptr = backend().mapped_device_pointer(ptr);
  } catch (...) {
    backend().unregister_host(ptr);
    throw;
  }
  return mapped_memory(ctx, ptr, device_ptr, bytes, unpin);
}

managed_memory host_only_memory_manager::memallocmanaged(std::size_t bytes, bool attach_global) {
  context& ctx = owning_context();
  if (bytes == 0) return managed_memory(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  void* const ptr = detail::allocate_with_retry(
      ctx, bytes, [&] { return backend().allocate_managed(bytes, attach_global); },
      [this](std::size_t wanted) { return release_for_retry(wanted); });
  auto release = unless_device_reset([ptr, device] {
    detail::scoped_device d(device);
    backend().deallocate_managed(ptr);
  });
  return managed_memory(ctx, ptr, bytes, deferred_release(release, bytes));
}

bool host_only_memory_manager::release_for_retry(std::size_t) {
  return false;
}

void host_only_memory_manager::reset() {
  owning_context().pending_deallocations().flush();
}

cleanup_guard host_only_memory_manager::defer_cleanup() {
  return owning_context().pending_deallocations().defer_cleanup();
}

}  // namespace gpumem
