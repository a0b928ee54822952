// Internal: the built-in managers that stand on an mr/ resource ("pool" and "async").
#pragma once

#include <gpumem/manager/memory_manager.hpp>

#include <memory>

namespace gpumem::detail {

// GPUMEM_MEMORY_MANAGER=pool: pool_resource over cuda_resource (cudaMalloc chunks).
std::unique_ptr<memory_manager> make_pool_memory_manager(context& owner);
// GPUMEM_MEMORY_MANAGER=async: async_resource (cudaMallocAsync on the device's default pool).
std::unique_ptr<memory_manager> make_async_memory_manager(context& owner);

}  // namespace gpumem::detail
