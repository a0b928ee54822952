// gpumem/manager/memory_manager_registry.hpp
//
// Memory managers by name, and the resolution of GPUMEM_MEMORY_MANAGER (the counterpart of
// NUMBA_CUDA_MEMORY_MANAGER, which names a module exporting `_numba_memory_manager`).
//
// Built-ins: "default" (default_memory_manager), "host_only" (device memory from the backend,
// freed AT ONCE when its last owner goes — no deferral; host memory through
// host_only_memory_manager), "pool" (pool_resource over cudaMalloc chunks) and "async"
// (cudaMallocAsync). Others are added with register_memory_manager, at static initialisation or
// before the first context is created.
//
// A value containing '/' or ending in ".so" is a shared library: it is dlopen()ed (RTLD_NOW |
// RTLD_LOCAL, never closed — the code of its managers must outlive every pointer they made) and
// its `gpumem_memory_manager_factory` entry point (see plugin.hpp) gives the factory. Every
// failure — unknown name, dlopen failure (with dlerror()), missing entry point, null factory,
// interface version mismatch, an entry point or a probed manager that throws something other
// than a gpumem::error (its message is kept) — is gpumem::logic_error naming
// GPUMEM_MEMORY_MANAGER's value; a gpumem::error thrown there passes as it is.
//
// Thread safety: all functions may be called from any thread (one mutex).
#pragma once

#include <gpumem/manager/memory_manager.hpp>

#include <string>
#include <vector>

namespace gpumem {

// Adds or replaces a named manager. `name` must be non-empty and contain no '/'.
void register_memory_manager(std::string name, memory_manager_factory factory);
// Names of the registered managers, sorted.
std::vector<std::string> registered_memory_managers();
// Resolves a GPUMEM_MEMORY_MANAGER value ("" means "default") as described above, including the
// version check. A value holding a NUL byte is refused (gpumem::logic_error). Messages name the
// value as "GPUMEM_MEMORY_MANAGER=<value>", or as "<origin>('<value>')" where an origin is given
// (a caller that takes the name from elsewhere than the environment, e.g. "set_memory_manager").
memory_manager_factory load_memory_manager(std::string const& value,
                                           std::string const& origin = {});

}  // namespace gpumem
