// A host program against gpumem: a pool over device memory, and the context's memory manager.
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <cstdio>
#include <exception>

int main() {
  try {
    std::printf("consumer_host: backend %s\n", gpumem::backend().description().c_str());
    gpumem::cuda_resource upstream;
    gpumem::pool_resource pool(upstream);
    void* a = pool.allocate(1 * gpumem::MiB, gpumem::stream_handle{});
    void* b = pool.allocate(256, gpumem::stream_handle{});
    bool const pool_ok = a != nullptr && b != nullptr && a != b && pool.statistics().chunks > 0;
    pool.deallocate(b, 256, gpumem::stream_handle{});
    pool.deallocate(a, 1 * gpumem::MiB, gpumem::stream_handle{});

    gpumem::memory_manager& manager = gpumem::current_context().memory_manager();
    bool manager_ok = false;
    {
      gpumem::memory_pointer p = manager.memalloc(4 * gpumem::KiB);
      manager_ok = p.device_pointer() != nullptr;
    }
    gpumem::close();
    std::printf("consumer_host: pool %s, memory manager %s\n", pool_ok ? "ok" : "FAILED",
                manager_ok ? "ok" : "FAILED");
    return pool_ok && manager_ok ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "consumer_host: %s\n", e.what());
    return 1;
  }
}
