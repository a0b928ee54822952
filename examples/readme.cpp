// The example of README.md, kept here so that it always compiles and runs (it is a test on the host
// backend like every example).
#include <gpumem/array/transfer.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <cstdio>
#include <vector>

int main() {
  gpumem::set_memory_manager(gpumem::load_memory_manager("pool"));  // or GPUMEM_MEMORY_MANAGER=pool
  gpumem::memory_manager& mm = gpumem::current_context().memory_manager();

  std::vector<float> host(1024, 1.0f);
  auto d = gpumem::to_device(host);               // allocated through the context's manager
  auto half = d.slice({gpumem::slice{0, 512}});   // a view: shares d's memory and ownership
  std::vector<float> back = half.copy_to_host();  // 512 elements

  {
    gpumem::cleanup_guard guard = mm.defer_cleanup();  // frees inside are deferred
    gpumem::memory_pointer scratch = mm.memalloc(64 << 20);
  }
  std::printf("%zu elements back, first %.1f, manager %s\n", back.size(), back[0],
              mm.name().c_str());
  gpumem::close();
  return back.size() == 512 && back[0] == 1.0f ? 0 : 1;
}
