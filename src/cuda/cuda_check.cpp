// The conversion of CUDA status codes into gpumem exceptions (see cuda_check.hpp).
#include "cuda_check.hpp"

#if GPUMEM_HAS_CUDA

#include "cuda_device_properties.hpp"
#include "cuda_driver.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>

#include <cuda.h>  // driver status codes only: nothing links libcuda

#include <string>
#include <utility>

namespace gpumem::detail {

void throw_cuda_error(cudaError_t status, char const* call, char const* file, int line,
                      std::string detail) {
  (void)cudaGetLastError();  // reported here; must not resurface in the next launch check
  if (detail.empty()) detail = cudaGetErrorString(status);
  throw cuda_error(static_cast<int>(status), cudaGetErrorName(status), call, file, line,
                   std::move(detail));
}

namespace {

// The device's out-of-memory report: `code_name` is what `call` returned.
[[noreturn]] void throw_device_out_of_memory(std::size_t requested_bytes, std::size_t peak_bytes,
                                             char const* call, char const* code_name) {
  int ordinal = 0;
  std::size_t free_bytes = 0, total_bytes = 0;
  std::string label = "cuda device (unknown)";
  if (cudaGetDevice(&ordinal) == cudaSuccess) {
    try {
      label = cuda_device_label(ordinal);
    } catch (cuda_error const&) {
      // keep the generic label: the out-of-memory report matters more than the device name
    }
  }
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    free_bytes = total_bytes = 0;
  }
  throw out_of_memory(requested_bytes, label, total_bytes - free_bytes, peak_bytes,
                      std::string(call) + " returned " + code_name + "; device has " +
                          format_bytes(free_bytes) + " free of " + format_bytes(total_bytes));
}

}  // namespace

void throw_allocation_failure(cudaError_t status, std::size_t requested_bytes,
                              std::size_t peak_bytes, char const* call, char const* file,
                              int line) {
  if (status != cudaErrorMemoryAllocation) throw_cuda_error(status, call, file, line);
  (void)cudaGetLastError();
  throw_device_out_of_memory(requested_bytes, peak_bytes, call, "cudaErrorMemoryAllocation");
}

void throw_driver_error(int status, char const* call, char const* file, int line,
                        std::string detail) {
  throw cuda_error(status, driver_error_name(status), call, file, line, std::move(detail));
}

void throw_driver_allocation_failure(int status, std::size_t requested_bytes,
                                     std::size_t peak_bytes, char const* call, char const* file,
                                     int line) {
  if (status != CUDA_ERROR_OUT_OF_MEMORY)
    throw_driver_error(status, call, file, line,
                       "requesting " + std::to_string(requested_bytes) + " bytes");
  throw_device_out_of_memory(requested_bytes, peak_bytes, call, "CUDA_ERROR_OUT_OF_MEMORY");
}

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
