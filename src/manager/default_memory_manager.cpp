#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"
#include "usage_counters.hpp"

#include <atomic>
#include <string>

namespace gpumem {

default_memory_manager::default_memory_manager(context& owner)
    : ipc_mixin<host_only_memory_manager>(owner),
      counters_(std::make_shared<detail::usage_counters>()) {}

default_memory_manager::~default_memory_manager() = default;

memory_pointer default_memory_manager::memalloc(std::size_t bytes) {
  context& ctx = owning_context();
  if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  detail::retry_outcome outcome;
  void* ptr = nullptr;
  try {
    ptr = detail::allocate_with_retry(
        ctx, bytes, [&] { return allocate_device(bytes); }, out_of_memory_handler_, &outcome);
  } catch (out_of_memory const& e) {
    // The retry after the flush failed too (or the size is one no allocation may have, which is
    // not retried): report it as this manager's failure.
    std::string detail;
    if (bytes > max_allocation_bytes) {
      detail = "cannot allocate " + std::to_string(bytes) +
               " bytes: above the largest allocation gpumem serves (" + std::string(e.what()) + ")";
    } else {
      detail = "after flushing the deferred deallocations and retrying once (" +
               std::string(e.what()) + ")";
      if (ctx.pending_deallocations().is_deferred())
        detail += "; inside defer_cleanup(), so nothing was flushed";
    }
    throw out_of_memory(bytes, "default memory manager", counters_->bytes_in_use.load(),
                        counters_->peak_bytes.load(), detail);
  }
  counters_->on_allocate(bytes, outcome.retried);
  auto release = [counters = counters_, free_device = device_release(ptr, bytes), bytes] {
    free_device();
    counters->on_free(bytes);
  };
  return memory_pointer(ctx, ptr, bytes, deferred_release(release, bytes));
}

memory_info default_memory_manager::get_memory_info() {
  detail::scoped_device on_device(owning_context().device());
  return backend().get_memory_info();
}

default_memory_manager::statistics default_memory_manager::get_statistics() const {
  statistics s;
  s.allocations = counters_->allocations.load(std::memory_order_relaxed);
  s.frees = counters_->frees.load(std::memory_order_relaxed);
  s.bytes_in_use = counters_->bytes_in_use.load(std::memory_order_relaxed);
  s.peak_bytes = counters_->peak_bytes.load(std::memory_order_relaxed);
  s.out_of_memory_retries = counters_->retries.load(std::memory_order_relaxed);
  pending_deallocations const& queue = owning_context().pending_deallocations();
  s.pending_count = queue.size();
  s.pending_bytes = queue.bytes();
  return s;
}

memory_statistics default_memory_manager::get_memory_statistics() const {
  memory_statistics s = memory_manager::get_memory_statistics();  // the queue's fields
  counters_->fill(s);
  s.held_bytes = s.bytes_in_use;  // no cache
  return s;
}

}  // namespace gpumem
