// Internal: the out-of-memory policy shared by the managers — try, and on out_of_memory ask the
// device's out-of-memory handlers (out_of_memory_handlers.hpp: the spill manager; first, because
// what they release may land in the deferred queue), flush the context's deferred frees (a no-op
// while deferred, as Numba), ask an optional hook, retry ONCE.
// A request above max_allocation_bytes can never be served: its out_of_memory is passed on at once,
// without flushing the queue or asking the hook (a pool would trim its caches for nothing).
#pragma once

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/out_of_memory_handlers.hpp>

#include <cstddef>
#include <functional>

namespace gpumem::detail {

struct retry_outcome {
  bool retried = false;
};

// before_recovery() runs once the first try has failed, before the handlers (a caller that
// skipped making the device current for the try makes it current there).
template <class Allocate, class BeforeRecovery = void (*)()>
auto allocate_with_retry(
    context& ctx, std::size_t bytes, Allocate&& allocate,
    std::function<bool(std::size_t)> const& on_out_of_memory = {}, retry_outcome* outcome = nullptr,
    BeforeRecovery&& before_recovery = [] {}) -> decltype(allocate()) {
  try {
    return allocate();
  } catch (out_of_memory const&) {
    if (bytes > max_allocation_bytes) throw;
    before_recovery();
    run_out_of_memory_handlers(ctx.device(), bytes);
    ctx.pending_deallocations().flush();
    if (on_out_of_memory) on_out_of_memory(bytes);
  }
  if (outcome != nullptr) outcome->retried = true;
  return allocate();
}

}  // namespace gpumem::detail
