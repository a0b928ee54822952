#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"
#include "usage_counters.hpp"

#include <optional>

namespace gpumem {

namespace detail {

// What frees a block of a resource_memory_manager: shared by the manager, every block's owner
// record and the unowned blocks' users, so a free may come after the manager is gone. It holds the
// context's queue (a queued item holds the state in turn; the context's close flushes the queue,
// which ends that cycle).
class block_state final : public unowned_blocks {
 public:
  block_state(std::shared_ptr<memory_resource> r, std::shared_ptr<usage_counters> c,
              context const& owner) noexcept
      : resource(std::move(r)),
        counters(std::move(c)),
        device(owner.device()),
        queue(owner.shared_pending_deallocations()),
        device_reset(owner.shared_device_reset_flag()),
        selects_device(resource->selects_own_device()) {}

  // Frees on the block's device and stream and uncounts it; after a device reset only uncounts.
  // A free the resource refused (a double free it caught: report_refused_deallocation) is not
  // uncounted: nothing was freed.
  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override {
    bool refused = false;
    if (!device_reset->load(std::memory_order_relaxed)) {
      try {
        std::optional<scoped_device> on_device;
        if (!selects_device) on_device.emplace(device);
        deallocation_watch const watch;
        resource->deallocate(ptr, bytes, stream);
        refused = watch.refused();
      } catch (std::exception const& e) {
        log(log_level::error, std::string("memory pointer finalizer failed: ") + e.what());
      } catch (...) {
        log(log_level::error, "memory pointer finalizer failed with a non-standard exception");
      }
    }
    if (!refused) counters->on_free(bytes);
  }
  // memalloc's free (see memalloc): queued on the context's queue, which releases it after a
  // device synchronisation; where the queue has no room, freed now after one. The caller holds a
  // reference to this state during the call (a closed queue releases at once, and the item's
  // reference may be the one that goes then).
  void deallocate_deferred(void* ptr, std::size_t bytes) noexcept override {
    defer(shared_from_this(), *this, ptr, bytes);
  }
  // The same, with the reference the queued item keeps (moved into it: no count taken for it).
  static void defer(std::shared_ptr<unowned_blocks> reference, block_state& state, void* ptr,
                    std::size_t bytes) noexcept {
    try {
      state.queue->enqueue(
          pending_deallocations::block_free{&release_queued, std::move(reference), ptr, nullptr},
          bytes);
      return;
    } catch (...) {
      try {
        scoped_device d(state.device);
        backend().synchronize();
      } catch (...) {
      }
    }
    state.deallocate(ptr, bytes, nullptr);
  }
  // pending_deallocations::block_free's function; `state` is the unowned_blocks of a block_state.
  static void release_queued(void* state, void* ptr, std::size_t bytes, void* stream) noexcept {
    static_cast<block_state*>(static_cast<unowned_blocks*>(state))
        ->deallocate(ptr, bytes, static_cast<stream_handle>(stream));
  }

  std::shared_ptr<memory_resource> const resource;
  std::shared_ptr<usage_counters> const counters;
  int const device;
  std::shared_ptr<pending_deallocations> const queue;
  // The context's: set once it has ended for a device reset (the reset took the memory).
  std::shared_ptr<std::atomic<bool> const> const device_reset;
  bool const selects_device;  // resource->selects_own_device(): no scoped_device around its calls
};

}  // namespace detail

namespace {

// `bytes` from the blocks' resource on `stream` on the context's device, retried once after the
// out-of-memory flush, and counted. The device is made current around the resource's call unless
// the resource selects it itself (a pool: that saves a cudaGetDevice per call), and always for the
// recovery before the retry.
void* counted_allocate(context& ctx, detail::block_state const& blocks,
                       resource_memory_manager::hooks const& callbacks, std::size_t bytes,
                       stream_handle stream) {
  std::optional<detail::scoped_device> on_device;
  auto const make_current = [&] {
    if (!on_device) on_device.emplace(ctx.device());
  };
  if (!blocks.selects_device) make_current();
  detail::retry_outcome outcome;
  void* const ptr = detail::allocate_with_retry(
      ctx, bytes, [&] { return blocks.resource->allocate(bytes, stream); },
      callbacks.on_out_of_memory, &outcome, make_current);
  blocks.counters->on_allocate(bytes, outcome.retried);
  return ptr;
}

// The owner record of a block (memory_pointer::adopt): frees it when the last pointer goes, at
// once on its stream (allocate) or through the context's queue (memalloc).
class block_owner final : public detail::allocation_owner {
 public:
  block_owner(std::shared_ptr<detail::block_state> state, void* ptr, std::size_t bytes,
              stream_handle stream, bool deferred, per_thread_stream_owner thread) noexcept
      : state_(std::move(state)),
        ptr_(ptr),
        bytes_(bytes),
        stream_(stream),
        deferred_(deferred),
        thread_(thread) {}
  block_owner(block_owner const&) = delete;
  block_owner& operator=(block_owner const&) = delete;

  // The caller guarantees the block is idle: it goes back to the resource at once, on its stream,
  // as a flushed batch goes after the queue's barrier. Inside defer_cleanup() nothing is freed: a
  // deferred block then takes the queue as usual.
  bool free_idle() noexcept override {
    if (deferred_) {
      try {
        if (state_->queue->is_deferred()) return false;
      } catch (...) {
        return false;
      }
    }
    state_->deallocate(ptr_, bytes_, stream_);
    freed_ = true;
    return true;
  }

  ~block_owner() override {
    if (freed_) return;
    // memalloc's (null stream); or a block of one thread's per-thread default stream freed by
    // another thread, whose free on that handle would be ordered on its own stream, not on the
    // stream the block was used on: it waits for the device, as memalloc's do.
    if (deferred_ || thread_.freed_by_another_thread())
      detail::block_state::defer(state_, *state_, ptr_, bytes_);
    else
      state_->deallocate(ptr_, bytes_, stream_);
  }

 private:
  std::shared_ptr<detail::block_state> state_;
  void* ptr_;
  std::size_t bytes_;
  stream_handle stream_;
  bool deferred_;
  per_thread_stream_owner thread_;
  bool freed_ = false;  // by free_idle
};

// A pointer owning `ptr` (just allocated); frees it if the owner record cannot be made.
memory_pointer adopt_block(context& ctx, std::shared_ptr<detail::block_state> const& state,
                           void* ptr, std::size_t bytes, stream_handle stream, bool deferred) {
  std::shared_ptr<detail::allocation_owner> owner;
  try {
    per_thread_stream_owner const thread =
        deferred ? per_thread_stream_owner() : per_thread_stream_owner(stream);
    owner = std::make_shared<block_owner>(state, ptr, bytes, stream, deferred, thread);
  } catch (...) {
    state->deallocate(ptr, bytes, stream);
    throw;
  }
  return memory_pointer::adopt(ctx, ptr, bytes, std::move(owner));
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
  blocks_ = std::make_shared<detail::block_state>(resource_, counters_, owner);
}

resource_memory_manager::~resource_memory_manager() {
  context_end const why = owning_context().ending();
  if (why == context_end::device_reset) {
    // Late frees (the queue is closed: they run at once) skip the resource once the context has
    // ended (its device-reset flag), and so need no device synchronisation before them either.
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
//   * before it releases anything the queue runs this manager's release barrier: ONE
//     device-wide synchronisation (backend().synchronize()), after which no work of any stream can
//     still touch what it releases; then every block goes back to the resource on the null
//     stream, where it is reusable at once by any later allocation. A batch the queue passes its
//     limits with is only retired; retired batches are released together behind one barrier
//     (when they pass their own, larger limits, and on flush, reset, out-of-memory and close), so
//     one synchronisation serves the retired list once it holds more than 16 times the count
//     limit (165 frees by default: 15 batches of 11) and a free costs no wait of its own.
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
  void* const ptr = counted_allocate(ctx, *blocks_, hooks_, bytes, nullptr);
  return adopt_block(ctx, blocks_, ptr, bytes, nullptr, /*deferred=*/true);  // see above
}

memory_pointer resource_memory_manager::allocate(std::size_t bytes, stream_handle stream) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  void* const ptr = counted_allocate(ctx, *blocks_, hooks_, bytes, stream);
  return adopt_block(ctx, blocks_, ptr, bytes, stream, /*deferred=*/false);
}

unowned_blocks* resource_memory_manager::unowned() const noexcept {
  return blocks_.get();
}

void* resource_memory_manager::allocate_unowned(std::size_t bytes, stream_handle stream) {
  if (bytes == 0) return nullptr;
  context& ctx = owning_context();
  return counted_allocate(ctx, *blocks_, hooks_, bytes, stream);
}

// memalloc's allocation (the null stream, no wait: see memalloc); unowned()->deallocate_deferred
// frees it as memalloc's pointer would.
void* resource_memory_manager::memalloc_unowned(std::size_t bytes) {
  return allocate_unowned(bytes, nullptr);
}

void resource_memory_manager::release_stream(stream_handle stream) {
  if (!hooks_.on_release_stream) return;
  detail::scoped_device on_device(owning_context().device());
  hooks_.on_release_stream(stream);
}

memory_statistics resource_memory_manager::get_memory_statistics() const {
  memory_statistics s = memory_manager::get_memory_statistics();  // the queue's fields
  counters_->fill(s);
  s.held_bytes = hooks_.held_bytes ? hooks_.held_bytes() : s.bytes_in_use;
  return s;
}

memory_info resource_memory_manager::get_memory_info() {
  detail::scoped_device on_device(owning_context().device());
  return resource_->get_memory_info();
}

bool resource_memory_manager::release_for_retry(std::size_t bytes) {
  if (!hooks_.on_out_of_memory) return false;
  detail::scoped_device on_device(owning_context().device());
  return hooks_.on_out_of_memory(bytes);
}

void resource_memory_manager::reset() {
  host_only_memory_manager::reset();
  if (hooks_.on_reset) hooks_.on_reset();
}

}  // namespace gpumem
