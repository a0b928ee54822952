// Internal to the cuda backend: the ONE place where CUDA runtime and driver status codes become
// gpumem exceptions.
//
//   GPUMEM_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
//
// Every failure becomes gpumem::cuda_error(code, cudaGetErrorName(code), call, file, line).
// Allocation calls go through detail::throw_allocation_failure instead, which turns
// cudaErrorMemoryAllocation into gpumem::out_of_memory (and every other code into cuda_error);
// driver calls go through detail::throw_driver_error / throw_driver_allocation_failure, the latter
// turning CUDA_ERROR_OUT_OF_MEMORY into gpumem::out_of_memory.
//
// Why the last error is cleared on every failure: the runtime keeps the status of the latest failed
// call in a per-thread slot that cudaGetLastError() reads. A failure that gpumem has already
// reported as an exception (a double registration, a failed allocation) would otherwise surface a
// second time in the next launch check and be blamed on an innocent kernel. Sticky errors (a
// kernel fault) survive the clearing, as CUDA intends: every later call keeps reporting them.
#pragma once

#include <gpumem/core/config.hpp>

#if GPUMEM_HAS_CUDA

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace gpumem::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, char const* call, char const* file, int line,
                                   std::string detail = {});

// Throws out_of_memory for cudaErrorMemoryAllocation (naming the device, its use and the backend's
// peak), cuda_error for anything else. `peak_bytes` is the backend's own high-water mark.
[[noreturn]] void throw_allocation_failure(cudaError_t status, std::size_t requested_bytes,
                                           std::size_t peak_bytes, char const* call,
                                           char const* file, int line);

// The same for driver API calls (the entry points fetched in cuda_driver.cpp): `status` is the
// CUresult. CUDA_ERROR_OUT_OF_MEMORY becomes out_of_memory in throw_driver_allocation_failure (for
// calls that allocate device memory, cuMemCreate) and cuda_error everywhere else; both name the
// code with cuGetErrorName.
[[noreturn]] void throw_driver_error(int status, char const* call, char const* file, int line,
                                     std::string detail = {});
[[noreturn]] void throw_driver_allocation_failure(int status, std::size_t requested_bytes,
                                                  std::size_t peak_bytes, char const* call,
                                                  char const* file, int line);

}  // namespace gpumem::detail

#define GPUMEM_CUDA_CHECK(expression, call_name)                                                \
  do {                                                                                          \
    cudaError_t const gpumem_cuda_status_ = (expression);                                       \
    if (gpumem_cuda_status_ != cudaSuccess)                                                     \
      ::gpumem::detail::throw_cuda_error(gpumem_cuda_status_, (call_name), __FILE__, __LINE__); \
  } while (0)

#endif  // GPUMEM_HAS_CUDA
