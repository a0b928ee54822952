// RMM competitors of bench_alloc; compiled only when CMake found librmm (see rmm_resources.hpp).
// RMM's resources are CCCL resources: allocate(stream, bytes, alignment) /
// deallocate(stream, ptr, bytes, alignment), with shared ownership of their state.
#include "rmm_resources.hpp"

#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>

#include <cuda_runtime_api.h>

#include <variant>

#ifndef GPUMEM_BENCH_RMM_DIR
#define GPUMEM_BENCH_RMM_DIR "?"
#endif

namespace gpumem::bench {

namespace {

using resource = std::variant<rmm::mr::pool_memory_resource, rmm::mr::arena_memory_resource>;

resource make(rmm_kind kind) {
  rmm::mr::cuda_memory_resource upstream;
  // The pool starts empty and grows as RMM's policy says (as gpumem's pool does); the arena takes
  // its default size up front (half of the free device memory).
  if (kind == rmm_kind::pool) return rmm::mr::pool_memory_resource(upstream, 0);
  return rmm::mr::arena_memory_resource(upstream);
}

constexpr std::size_t alignment = 256;

}  // namespace

std::string rmm_status() {
  return std::string("found: ") + GPUMEM_BENCH_RMM_DIR;
}

bool rmm_available() {
  return true;
}

void* rmm_create(rmm_kind kind) {
  return new resource(make(kind));
}

void rmm_destroy(void* r) {
  delete static_cast<resource*>(r);
}

void* rmm_allocate(void* r, std::size_t bytes, void* stream) {
  cuda::stream_ref const s(static_cast<cudaStream_t>(stream));
  return std::visit([&](auto& mr) { return mr.allocate(s, bytes, alignment); },
                    *static_cast<resource*>(r));
}

void rmm_deallocate(void* r, void* ptr, std::size_t bytes, void* stream) {
  cuda::stream_ref const s(static_cast<cudaStream_t>(stream));
  std::visit([&](auto& mr) { mr.deallocate(s, ptr, bytes, alignment); },
             *static_cast<resource*>(r));
}

}  // namespace gpumem::bench
