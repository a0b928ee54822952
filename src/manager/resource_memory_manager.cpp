#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"
#include "usage_counters.hpp"

namespace gpumem {

resource_memory_manager::resource_memory_manager(context& owner,
                                                 std::shared_ptr<memory_resource> resource,
                                                 hooks callbacks, std::string name)
    : ipc_mixin<host_only_memory_manager>(owner),
      resource_(std::move(resource)),
      counters_(std::make_shared<detail::usage_counters>()),
      hooks_(std::move(callbacks)),
      name_(std::move(name)) {
  GPUMEM_EXPECTS(resource_ != nullptr, "resource_memory_manager: the resource is null");
  if (name_.empty()) name_ = resource_->name();
  if (debug_memory_enabled()) {
    resource_debug_ = make_shared_tracking_adaptor(std::move(resource_));
    resource_ = resource_debug_;
  }
}

tracking_adaptor* resource_memory_manager::debug_tracker() const noexcept {
  return resource_debug_.get();
}

memory_pointer resource_memory_manager::memalloc(std::size_t bytes) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  detail::retry_outcome outcome;
  void* const ptr = detail::allocate_with_retry(
      ctx, bytes, [&] { return resource_->allocate_sync(bytes); }, hooks_.on_out_of_memory,
      &outcome);
  counters_->on_allocate(bytes, outcome.retried);
  // Freed at once (see the class comment); the finalizer shares the resource so it outlives the
  // manager if need be.
  return memory_pointer(ctx, ptr, bytes,
                        [resource = resource_, counters = counters_, ptr, bytes, device] {
                          detail::scoped_device d(device);
                          resource->deallocate_sync(ptr, bytes);
                          counters->on_free(bytes);
                        });
}

memory_pointer resource_memory_manager::allocate(std::size_t bytes, stream_handle stream) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  detail::retry_outcome outcome;
  void* const ptr = detail::allocate_with_retry(
      ctx, bytes, [&] { return resource_->allocate(bytes, stream); }, hooks_.on_out_of_memory,
      &outcome);
  counters_->on_allocate(bytes, outcome.retried);
  return memory_pointer(ctx, ptr, bytes,
                        [resource = resource_, counters = counters_, ptr, bytes, device, stream] {
                          detail::scoped_device d(device);
                          resource->deallocate(ptr, bytes, stream);
                          counters->on_free(bytes);
                        });
}

void resource_memory_manager::release_stream(stream_handle stream) {
  if (!hooks_.on_release_stream) return;
  detail::scoped_device on_device(owning_context().device());
  hooks_.on_release_stream(stream);
}

memory_statistics resource_memory_manager::get_memory_statistics() const {
  memory_statistics s = counters_->snapshot();
  s.held_bytes = hooks_.held_bytes ? hooks_.held_bytes() : s.bytes_in_use;
  pending_deallocations const& queue = owning_context().pending_deallocations();
  s.pending_count = queue.size();
  s.pending_bytes = queue.bytes();
  return s;
}

memory_info resource_memory_manager::get_memory_info() {
  detail::scoped_device on_device(owning_context().device());
  return resource_->get_memory_info();
}

void resource_memory_manager::reset() {
  host_only_memory_manager::reset();
  if (hooks_.on_reset) hooks_.on_reset();
}

}  // namespace gpumem
