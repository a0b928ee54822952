// The per-device choice of memory manager made from Python (gpumem.set_memory_manager): a
// manager name, pool options and an optional CSV allocation log per device, served to gpumem's
// context table through one dispatching factory.
#pragma once

#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <optional>
#include <string>

namespace gpumem::python {

struct manager_spec {
  std::string name = "default";  // default, host_only, pool, async, or a plugin library
  pool_options pool;             // for "pool"
  std::string log_path;          // CSV allocation log (pool and async only); empty: none
};

// Makes `spec` the manager of `device` (all devices when empty) for contexts created from now on,
// and closes the existing context(s) concerned so that the next use binds it. Checks the spec at
// once (an unknown name, options for a manager that takes none: logic_error).
void set_manager(manager_spec const& spec, std::optional<int> device);
// Back to the environment's choice (GPUMEM_MEMORY_MANAGER) for every device; closes all contexts.
void reset_managers();

}  // namespace gpumem::python
