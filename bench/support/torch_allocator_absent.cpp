// Stand-in for torch_allocator.cpp where CMake did not find libtorch.
#include "torch_allocator.hpp"

#include <stdexcept>

namespace gpumem::bench {

std::string torch_status() {
#ifdef GPUMEM_BENCH_TORCH_REASON
  return std::string("not found (") + GPUMEM_BENCH_TORCH_REASON + ")";
#else
  return "not found";
#endif
}
bool torch_available() {
  return false;
}
void* torch_allocate(std::size_t, void*) {
  throw std::logic_error("PyTorch not found");
}
void torch_deallocate(void*) {}
void torch_empty_cache() {}

}  // namespace gpumem::bench
