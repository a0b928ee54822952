#include <gpumem/manager/context.hpp>
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
  // close(device): the pool closes while the device's CUDA context is alive (it waits for the
  // device, gives back every chunk without a live block, destroys its events and stream). Chunks
  // still in use go when the pool does, unless the context is about to be reset (Numba's
  // cuda.close()), which frees them: then they are never given back by address.
  hooks.on_close = [raw](context_end why) {
    raw->close(why == context_end::device_reset ? pool_live_chunks::abandon
                                                : pool_live_chunks::give_back_at_destruction);
  };
  hooks.on_release_stream = [raw](stream_handle stream) { raw->release_stream(stream); };
  hooks.held_bytes = [raw] { return raw->statistics().held_bytes; };
  return hooks;
}

}  // namespace gpumem
