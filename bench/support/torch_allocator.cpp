// PyTorch competitor of bench_alloc; compiled only when CMake found torch (see
// torch_allocator.hpp).
#include "torch_allocator.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <mutex>

#ifndef GPUMEM_BENCH_TORCH_DIR
#define GPUMEM_BENCH_TORCH_DIR "?"
#endif

namespace gpumem::bench {

namespace {
void initialize() {
  static std::once_flag once;
  std::call_once(once, [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) count = 1;
    c10::cuda::CUDACachingAllocator::init(count);
  });
}
}  // namespace

std::string torch_status() {
  return std::string("found: ") + GPUMEM_BENCH_TORCH_DIR;
}

bool torch_available() {
  return true;
}

void* torch_allocate(std::size_t bytes, void* cuda_stream) {
  initialize();
  return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(
      bytes, static_cast<cudaStream_t>(cuda_stream));
}

void torch_deallocate(void* ptr) {
  c10::cuda::CUDACachingAllocator::raw_delete(ptr);
}

void torch_empty_cache() {
  initialize();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

}  // namespace gpumem::bench
