// gpumem/manager/pool_manager_hooks.hpp
//
// The hooks that tie a pool_resource to the resource_memory_manager above it: those of the built-in
// "pool" manager, for a pool manager composed otherwise (pool options, another upstream, an adaptor
// such as a log between the manager and the pool):
//
//   auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>(), options);
//   resource_memory_manager::hooks hooks = pool_manager_hooks(pool->adaptor());
//   return std::make_unique<resource_memory_manager>(ctx, std::move(pool), std::move(hooks));
//
// on_out_of_memory and on_reset trim the pool (its empty chunks go back to the device: on
// out-of-memory the pool has already drained its caches and waited for pending frees, so the
// chunks are what is left to give); on_release_stream is the pool's release_stream; held_bytes is
// its statistics' held bytes; on_close closes the pool (pool_resource::close: while the device's
// context lives, everything releasable goes; chunks still in use are abandoned when the context
// ends with context_end::device_reset, given back when the pool goes otherwise).
//
// Ownership: the hooks refer to the pool without owning it: it must outlive them, as it does when
// the manager they are given to owns the pool (directly or through adaptors). Thread safety: the
// pool's. Errors: those of the pool's calls.
#pragma once

#include <gpumem/manager/resource_memory_manager.hpp>

namespace gpumem {

class pool_resource;

resource_memory_manager::hooks pool_manager_hooks(pool_resource& pool);

}  // namespace gpumem
