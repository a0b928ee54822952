// Internal to the backends: the address range of a copy or fill, checked before the work is
// queued, so that both backends answer a bad one the same way: cudaErrorInvalidValue naming it.
// (CUDA's own answer varies: a null pageable host pointer faults inside cudaMemcpy on the host,
// and on the host backend a memmove on a stream's worker took the process down.)
#pragma once

#include <gpumem/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gpumem::detail {

// Throws cuda_error(cudaErrorInvalidValue) when [p, p + bytes) is null or wraps the address space
// (bytes > 0). `call` names the operation, `which` the range ("source", "destination").
inline void check_copy_range(void const* p, std::size_t bytes, char const* call,
                             char const* which) {
  auto const start = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || (p != nullptr && start <= ~std::uintptr_t{0} - bytes)) return;
  char address[32];
  std::snprintf(address, sizeof address, "%p", p);
  throw cuda_error(1, "cudaErrorInvalidValue", call, __FILE__, __LINE__,
                   std::string("the ") + which + " [" + address + ", +" + std::to_string(bytes) +
                       " bytes) is " +
                       (p == nullptr ? "null" : "past the end of the address space"));
}

}  // namespace gpumem::detail
