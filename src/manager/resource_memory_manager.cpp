#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"
#include "usage_counters.hpp"

namespace gpumem {

namespace {

// `bytes` from `resource` on `stream` (the caller has made the context's device current), retried
// once after the out-of-memory flush, and counted.
void* counted_allocate(context& ctx, memory_resource& resource, detail::usage_counters& counters,
                       resource_memory_manager::hooks const& callbacks, std::size_t bytes,
                       stream_handle stream) {
  detail::retry_outcome outcome;
  void* const ptr = detail::allocate_with_retry(
      ctx, bytes, [&] { return resource.allocate(bytes, stream); }, callbacks.on_out_of_memory,
      &outcome);
  counters.on_allocate(bytes, outcome.retried);
  return ptr;
}

// The finalizer of a counted_allocate block: frees it on its device and stream and uncounts it. It
// shares the resource and the counters, so it may run after the manager is gone.
auto counted_release(std::shared_ptr<memory_resource> resource,
                     std::shared_ptr<detail::usage_counters> counters, void* ptr, std::size_t bytes,
                     int device, stream_handle stream) {
  return
      [resource = std::move(resource), counters = std::move(counters), ptr, bytes, device, stream] {
        if (!counters->device_reset.load(std::memory_order_relaxed)) {
          detail::scoped_device d(device);
          resource->deallocate(ptr, bytes, stream);
        }
        counters->on_free(bytes);
      };
}

}  // namespace

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
  // One device synchronisation before each batch of deferred frees (see memalloc). Setting it is
  // no device work, so the constructor stays legal on set_memory_manager's probe context.
  owner.pending_deallocations().set_release_barrier([device = owner.device()] {
    detail::scoped_device d(device);
    backend().synchronize();
  });
  if (debug_memory_enabled()) {
    resource_debug_ = make_shared_tracking_adaptor(std::move(resource_));
    resource_ = resource_debug_;
  }
}

resource_memory_manager::~resource_memory_manager() {
  context_end const why = owning_context().ending();
  if (why == context_end::device_reset) {
    // Late frees (the queue is closed: they run at once) skip the resource, and so need no
    // device synchronisation before them either.
    counters_->device_reset.store(true);
    owning_context().pending_deallocations().set_release_barrier({});
  }
  if (!hooks_.on_close) return;
  try {
    detail::scoped_device on_device(owning_context().device());
    hooks_.on_close(why);
  } catch (std::exception const& e) {
    log(log_level::warn, name_ + ": releasing memory at close failed: " + e.what());
  }
}

tracking_adaptor* resource_memory_manager::debug_tracker() const noexcept {
  return resource_debug_.get();
}

// EMM memory (memalloc) and why it needs no synchronisation per call.
//
// The EMM has no stream: memory from memalloc may be used by work on ANY stream (including
// non-blocking ones and other frameworks'), and its finalizer may run while that work is still in
// flight. So memory freed through the EMM may be in use by the device until a device-wide
// synchronisation. Instead of synchronising around every call (allocate_sync/deallocate_sync: two
// waits per allocation, and a host blocked on every drop of an array), the free is queued on the
// context's pending_deallocations, exactly as Numba's default manager queues its cuMemFree:
//   * the queue is flushed past NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT items or _RATIO of the
//     device's memory, on reset(), and on out-of-memory before the single retry; while a
//     defer_cleanup() guard lives nothing is released;
//   * before each flushed batch the queue runs this manager's release barrier: ONE
//     device-wide synchronisation (backend().synchronize()), after which no work of any stream can
//     still touch the batch; then every block goes back to the resource on the null stream, where
//     it is reusable at once by any later allocation.
// memalloc therefore allocates on the null stream without waiting: a block the resource hands out
// there was either freed through this queue (idle since the flush's synchronisation) or freed in
// stream order on the null stream (allocate(bytes, nullptr)), which the legacy default stream
// orders before work on every blocking stream.
// A free that arrives after the context was closed runs at once, after the same barrier; a failed
// synchronisation (a reset CUDA context) is logged and the block still goes back (deallocate is
// noexcept), so a late free never throws.
memory_pointer resource_memory_manager::memalloc(std::size_t bytes) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  void* const ptr = counted_allocate(ctx, *resource_, *counters_, hooks_, bytes, nullptr);
  // Deferred (see above).
  return memory_pointer(
      ctx, ptr, bytes,
      deferred_release(counted_release(resource_, counters_, ptr, bytes, device, nullptr), bytes));
}

memory_pointer resource_memory_manager::allocate(std::size_t bytes, stream_handle stream) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  void* const ptr = counted_allocate(ctx, *resource_, *counters_, hooks_, bytes, stream);
  return memory_pointer(ctx, ptr, bytes,
                        counted_release(resource_, counters_, ptr, bytes, device, stream));
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
