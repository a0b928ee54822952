// The "pool" and "async" built-in memory managers: each is a resource_memory_manager over a stack
// of mr/ resources (which resource_memory_manager wraps in the debug adaptor when
// GPUMEM_DEBUG_MEMORY is on). This is the "plugin in a few lines" the manager layer promises, used
// by gpumem itself.
#include "builtin_resource_managers.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/ipc_handle.hpp>
#include <gpumem/manager/pool_manager_hooks.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>

namespace gpumem::detail {

std::unique_ptr<memory_manager> make_pool_memory_manager(context& owner) {
  auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>(), pool_options{});
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
  ipc_handle get_ipc_handle(memory_pointer const&) override {
    throw not_supported(
        "the async memory manager cannot export IPC handles: its memory comes from "
        "cudaMallocAsync's stream-ordered pool, which CUDA's legacy IPC does not cover; use the "
        "default or pool manager for memory shared between processes");
  }
};
}  // namespace

std::unique_ptr<memory_manager> make_async_memory_manager(context& owner) {
  async_resource_options options;
  // Keep freed memory in the driver's pool across synchronisations: with the default threshold of
  // 0 every synchronisation returns it to the driver and the next allocation pays for it again.
  options.release_threshold = ~std::size_t{0};
  std::shared_ptr<memory_resource> resource = std::make_shared<async_resource>(options);
  return std::make_unique<async_memory_manager>(owner, std::move(resource),
                                                resource_memory_manager::hooks{}, "async");
}

}  // namespace gpumem::detail
