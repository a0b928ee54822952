// Stand-in for rmm_resources.cpp where CMake did not find librmm.
#include "rmm_resources.hpp"

#include <stdexcept>

namespace gpumem::bench {

std::string rmm_status() {
#ifdef GPUMEM_BENCH_RMM_REASON
  return std::string("not found (") + GPUMEM_BENCH_RMM_REASON + ")";
#else
  return "not found";
#endif
}
bool rmm_available() {
  return false;
}
void* rmm_create(rmm_kind) {
  throw std::logic_error("librmm not found");
}
void rmm_destroy(void*) {}
void* rmm_allocate(void*, std::size_t, void*) {
  throw std::logic_error("librmm not found");
}
void rmm_deallocate(void*, void*, std::size_t, void*) {}

}  // namespace gpumem::bench
