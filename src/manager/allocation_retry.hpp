// Internal: the out-of-memory policy shared by the managers — try, and on out_of_memory flush the
// context's deferred frees (a no-op while deferred, as Numba), ask an optional hook, retry ONCE.
#pragma once

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <cstddef>
#include <functional>

namespace gpumem::detail {

struct retry_outcome {
  bool retried = false;
};

template <class Allocate>
auto allocate_with_retry(context& ctx, std::size_t bytes, Allocate&& allocate,
                         std::function<bool(std::size_t)> const& on_out_of_memory = {},
                         retry_outcome* outcome = nullptr) -> decltype(allocate()) {
  try {
    return allocate();
  } catch (out_of_memory const&) {
    ctx.pending_deallocations().flush();
    if (on_out_of_memory) on_out_of_memory(bytes);
  }
  if (outcome != nullptr) outcome->retried = true;
  return allocate();
}

}  // namespace gpumem::detail
