// cudaLimitMallocHeapSize behind the primitive layer (see device_malloc_heap.hpp).
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/device_malloc_heap.hpp>

#include "cuda_check.hpp"

#include <atomic>
#include <string>

namespace gpumem::detail {

namespace {
std::atomic<std::size_t> host_malloc_heap_size{std::size_t{8} << 20};
}

void set_device_malloc_heap_size(std::size_t bytes) {
  if (backend().kind() == backend_kind::host) {
    host_malloc_heap_size.store(bytes);
    return;
  }
#if GPUMEM_HAS_CUDA
  std::size_t current = 0;
  GPUMEM_CUDA_CHECK(cudaDeviceGetLimit(&current, cudaLimitMallocHeapSize),
                    "cudaDeviceGetLimit(cudaLimitMallocHeapSize)");
  if (current >= bytes) return;
  cudaError_t const status = cudaDeviceSetLimit(cudaLimitMallocHeapSize, bytes);
  if (status != cudaSuccess) {
    throw_cuda_error(status, "cudaDeviceSetLimit(cudaLimitMallocHeapSize)", __FILE__, __LINE__,
                     "cannot size CUDA's malloc heap to " + format_bytes(bytes) + " (it is " +
                         format_bytes(current) +
                         "); CUDA allows it only before the first kernel that uses malloc/free");
  }
#else
  throw not_supported("set_device_malloc_heap_size: gpumem was built without CUDA");
#endif
}

std::size_t device_malloc_heap_size() {
  if (backend().kind() == backend_kind::host) return host_malloc_heap_size.load();
#if GPUMEM_HAS_CUDA
  std::size_t current = 0;
  GPUMEM_CUDA_CHECK(cudaDeviceGetLimit(&current, cudaLimitMallocHeapSize),
                    "cudaDeviceGetLimit(cudaLimitMallocHeapSize)");
  return current;
#else
  throw not_supported("device_malloc_heap_size: gpumem was built without CUDA");
#endif
}

}  // namespace gpumem::detail
