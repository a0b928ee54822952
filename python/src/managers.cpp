#include "managers.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/manager/pool_manager_hooks.hpp>
#include <gpumem/manager/resource_memory_manager.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/owning_adaptor.hpp>

#include <exception>
#include <map>
#include <memory>
#include <mutex>

namespace gpumem::python {
namespace {

struct spec_table {
  std::mutex mutex;
  std::map<int, manager_spec> by_device;
  std::optional<manager_spec> for_all;
  memory_manager_factory environment;  // what contexts of unnamed devices get
  bool installed = false;
};

spec_table& specs() {
  static spec_table* const table = new spec_table();  // never destroyed: used by atexit's close()
  return *table;
}

std::shared_ptr<memory_resource> with_log(std::unique_ptr<memory_resource> resource,
                                          std::string const& path) {
  if (path.empty()) return std::shared_ptr<memory_resource>(std::move(resource));
  // Flushed per line: the log is read while the process runs (gpumem.dask collects workers' logs).
  return make_owning_adaptor<logging_adaptor>(std::move(resource), path, logging_options{true});
}

std::unique_ptr<memory_manager> make_pool(context& ctx, manager_spec const& spec) {
  auto pool = make_owning_adaptor<pool_resource>(std::make_unique<cuda_resource>(), spec.pool);
  // The built-in pool manager's hooks; the log (if any) stands between the manager and the pool.
  resource_memory_manager::hooks hooks = pool_manager_hooks(pool->adaptor());
  return std::make_unique<resource_memory_manager>(ctx, with_log(std::move(pool), spec.log_path),
                                                   std::move(hooks), "pool");
}

std::unique_ptr<memory_manager> make_logged_async(context& ctx, manager_spec const& spec) {
  async_resource_options options;
  options.release_threshold = ~std::size_t{0};  // as the built-in async manager
  return std::make_unique<resource_memory_manager>(
      ctx, with_log(std::make_unique<async_resource>(options), spec.log_path),
      resource_memory_manager::hooks{}, "async");
}

memory_manager_factory factory_for(manager_spec const& spec) {
  if (spec.name == "pool") return [spec](context& c) { return make_pool(c, spec); };
  GPUMEM_EXPECTS(spec.log_path.empty() || spec.name == "async",
                 "set_memory_manager: an allocation log needs the pool or async manager, not '" +
                     spec.name + "'");
  if (spec.name == "async" && !spec.log_path.empty())
    return [spec](context& c) { return make_logged_async(c, spec); };
  GPUMEM_EXPECTS(!spec.name.empty(),
                 "set_memory_manager: the manager's name is empty (give 'default', 'host_only', "
                 "'pool', 'async' or a plugin library's path)");
  // Built-ins and plugin libraries, checked; errors name the call, not the environment variable.
  return load_memory_manager(spec.name, "set_memory_manager");
}

memory_manager_factory dispatching_factory() {
  return [](context& c) {
    spec_table& table = specs();
    std::optional<manager_spec> chosen;
    memory_manager_factory fallback;
    {
      std::lock_guard<std::mutex> lock(table.mutex);
      auto it = table.by_device.find(c.device());
      if (it != table.by_device.end())
        chosen = it->second;
      else if (table.for_all)
        chosen = table.for_all;
      fallback = table.environment;
    }
    return chosen ? factory_for(*chosen)(c) : fallback(c);
  };
}

}  // namespace

void set_manager(manager_spec const& spec, std::optional<int> device) {
  memory_manager_factory const checked = factory_for(spec);
  check_memory_manager_version(checked, "'" + spec.name + "'");
  spec_table& t = specs();
  bool install = false;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (!t.installed) {
      // What devices without a choice get. A bad GPUMEM_MEMORY_MANAGER fails their contexts
      // (when one is created), not this explicit choice.
      try {
        t.environment = current_memory_manager_factory();
      } catch (gpumem::error const&) {
        t.environment =
            [failure = std::current_exception()](context&) -> std::unique_ptr<memory_manager> {
          std::rethrow_exception(failure);
        };
      }
    }
    if (device) {
      t.by_device[*device] = spec;
    } else {
      t.by_device.clear();
      t.for_all = spec;
    }
    install = !t.installed;
    t.installed = true;
  }
  // Outside the lock: set_memory_manager calls the factory once (its version probe).
  if (install) set_memory_manager(dispatching_factory());
  if (device)
    gpumem::close(*device);
  else
    gpumem::close();
}

void reset_managers() {
  spec_table& t = specs();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.by_device.clear();
    t.for_all.reset();
    t.installed = false;
  }
  set_memory_manager({});
  gpumem::close();
}

}  // namespace gpumem::python
