// Internal to the host backend: CUDA's numeric error codes and the one way the host backend fails,
// so callers see the same gpumem::cuda_error codes on both backends.
#pragma once

#include <gpumem/core/error.hpp>

#include <cstdio>
#include <string>
#include <utility>

namespace gpumem::detail::host {

constexpr int invalid_value = 1;                 // cudaErrorInvalidValue
constexpr int invalid_device = 101;              // cudaErrorInvalidDevice
constexpr int map_failed = 205;                  // cudaErrorMapBufferObjectFailed
constexpr int invalid_resource_handle = 400;     // cudaErrorInvalidResourceHandle
constexpr int not_ready = 600;                   // cudaErrorNotReady
constexpr int host_memory_registered = 712;      // cudaErrorHostMemoryAlreadyRegistered
constexpr int host_memory_not_registered = 713;  // cudaErrorHostMemoryNotRegistered

[[noreturn]] inline void fail(int code, char const* code_name, char const* call,
                              std::string detail) {
  throw cuda_error(code, code_name, std::string("host backend: ") + call, __FILE__, __LINE__,
                   std::move(detail));
}

inline std::string pointer_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

}  // namespace gpumem::detail::host
