// The "pool" and "async" built-in memory managers: each is a resource_memory_manager over a stack
// of mr/ resources (which resource_memory_manager wraps in the debug adaptor when
// GPUMEM_DEBUG_MEMORY is on). This is the "plugin in a few lines" the manager layer promises, used
// by gpumem itself.
#include "builtin_resource_managers.hpp"

#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/ipc_handle.hpp>
#include <gpumem/manager/pool_manager_hooks.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>

namespace gpumem::detail {

std::unique_ptr<memory_manager> make_pool_memory_manager(context& owner) {
  pool_options options;  // GPUMEM_POOL_MAX_CACHED_SIZE: the cached limit (docs/environment.md)
  options.max_cached_size = environment_snapshot().pool_max_cached_size;
  auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>(), options);
  resource_memory_manager::hooks hooks = pool_manager_hooks(pool->adaptor());
  std::shared_ptr<memory_resource> resource = std::move(pool);
  return std::make_unique<resource_memory_manager>(owner, std::move(resource), std::move(hooks),
                                                   "pool");
}

namespace {
// Memory of a stream-ordered pool cannot be exported with CUDA's legacy IPC (cudaIpcGetMemHandle
// rejects it); say so in gpumem's terms instead of passing on the driver's "invalid argument".
class async_memory_manager final : public resource_memory_manager {
 public:
  using resource_memory_manager::resource_memory_manager;
  // Keep freed memory in the driver's pool across synchronisations: with the default threshold of
  // 0 every synchronisation returns it to the driver and the next allocation pays for it again.
  // Set here, on the context's device, not by the constructor (which runs on set_memory_manager's
  // probe context too, and must not touch the device).
  void initialize() override {
    resource_memory_manager::initialize();
    scoped_device const on_device(owning_context().device());
    backend().set_async_release_threshold(~std::size_t{0});
  }
  ipc_handle get_ipc_handle(memory_pointer const&) override {
    throw not_supported(
        "the async memory manager cannot export IPC handles: its memory comes from "
        "cudaMallocAsync's stream-ordered pool, which CUDA's legacy IPC does not cover; use the "
        "default or pool manager for memory shared between processes");
  }
};

// What the driver's pool keeps goes back to the driver: at reset(), and before the retry of an
// allocation that ran out of memory (the pool keeps everything freed: its release threshold is
// the largest). The frees must be seen complete first (a device synchronisation), or the driver
// counts them as in use; inside defer_cleanup(), which promises no wait, only what is already
// known free goes back.
void give_back_async_pool(async_resource& resource, context& owner) {
  scoped_device const on_device(owner.device());
  if (!owner.pending_deallocations().is_deferred()) backend().synchronize();
  resource.trim(0);
}
}  // namespace

std::unique_ptr<memory_manager> make_async_memory_manager(context& owner) {
  auto async = std::make_shared<async_resource>();  // threshold: see initialize()
  async_resource* const raw = async.get();          // owned by the manager, as the hooks are
  context* const ctx = &owner;                      // outlives its manager, hence the hooks
  resource_memory_manager::hooks hooks;
  hooks.on_reset = [raw, ctx] { give_back_async_pool(*raw, *ctx); };
  hooks.on_out_of_memory = [raw, ctx](std::size_t) {
    give_back_async_pool(*raw, *ctx);
    return true;
  };
  std::shared_ptr<memory_resource> resource = std::move(async);
  return std::make_unique<async_memory_manager>(owner, std::move(resource), std::move(hooks),
                                                "async");
}

}  // namespace gpumem::detail
