#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/pool_manager_hooks.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <cstddef>

namespace gpumem {

resource_memory_manager::hooks pool_manager_hooks(pool_resource& pool) {
  pool_resource* const raw = &pool;
  resource_memory_manager::hooks hooks;
  hooks.on_out_of_memory = [raw](std::size_t) {
    raw->trim();
    return true;
  };
  hooks.on_reset = [raw] { raw->trim(); };
  // close(device): after one device synchronisation every stream is idle, so trim makes all freed
  // memory free and gives back every chunk without a live block, while the device's CUDA context
  // is alive (Numba's cuda.close() resets it next).
  hooks.on_close = [raw] {
    backend().synchronize();
    raw->trim();
  };
  hooks.on_release_stream = [raw](stream_handle stream) { raw->release_stream(stream); };
  hooks.held_bytes = [raw] { return raw->statistics().held_bytes; };
  return hooks;
}

}  // namespace gpumem
