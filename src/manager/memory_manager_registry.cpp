#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/manager/ipc_mixin.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/manager/plugin.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>
#include "allocation_retry.hpp"
#include "builtin_resource_managers.hpp"
#include "plugin_calls.hpp"
#include "usage_counters.hpp"

#include <dlfcn.h>

#include <exception>
#include <map>
#include <memory>
#include <mutex>

namespace gpumem {

namespace detail {
namespace {

// The "host_only" built-in: device memory straight from the backend (through the debug adaptor with
// GPUMEM_DEBUG_MEMORY), freed as soon as its last owner goes (no deferral); host and managed memory
// through host_only_memory_manager's queue.
// Counts its device memory as default_memory_manager does (the same usage counters).
class immediate_memory_manager final : public ipc_mixin<host_only_memory_manager> {
 public:
  using ipc_mixin<host_only_memory_manager>::ipc_mixin;
  memory_pointer memalloc(std::size_t bytes) override {
    context& ctx = owning_context();
    if (bytes == 0) return memory_pointer(ctx, nullptr, 0);
    int const device = ctx.device();
    scoped_device on_device(device);
    retry_outcome outcome;
    void* const ptr = allocate_with_retry(
        ctx, bytes, [&] { return allocate_device(bytes); }, {}, &outcome);
    counters_->on_allocate(bytes, outcome.retried);
    auto release = [counters = counters_, free_device = device_release(ptr, bytes), bytes] {
      free_device();
      counters->on_free(bytes);
    };
    return memory_pointer(ctx, ptr, bytes, release);
  }
  memory_statistics get_memory_statistics() const override {
    memory_statistics s = memory_manager::get_memory_statistics();  // the queue's fields
    counters_->fill(s);
    s.held_bytes = s.bytes_in_use;  // no cache
    return s;
  }
  memory_info get_memory_info() override {
    scoped_device on_device(owning_context().device());
    return backend().get_memory_info();
  }
  int interface_version() const override { return memory_manager_interface_version; }
  std::string name() const override { return "host_only"; }

 private:
  // Shared with the pointers' releases, which may outlive the manager.
  std::shared_ptr<usage_counters> counters_ = std::make_shared<usage_counters>();
};

struct registry {
  std::mutex mutex;
  std::map<std::string, memory_manager_factory> factories;
  registry() {
    factories["default"] = [](context& c) { return std::make_unique<default_memory_manager>(c); };
    factories["host_only"] = [](context& c) {
      return std::make_unique<immediate_memory_manager>(c);
    };
    factories["pool"] = detail::make_pool_memory_manager;
    factories["async"] = detail::make_async_memory_manager;
  }
};

registry& the_registry() {
  static registry instance;
  return instance;
}

bool is_library_path(std::string const& value) {
  return value.find('/') != std::string::npos ||
         (value.size() > 3 && value.compare(value.size() - 3, 3, ".so") == 0);
}

std::string names_joined() {
  std::string joined;
  for (std::string const& name : registered_memory_managers())
    joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

memory_manager_factory load_plugin_library(std::string const& path, std::string const& what) {
  // Never dlclose'd: managers and the finalizers of their pointers run code from the library.
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    char const* reason = ::dlerror();
    throw logic_error(
        what + ": cannot load the shared library: " + (reason ? reason : "unknown dlopen error"));
  }
  ::dlerror();
  void* symbol = ::dlsym(library, GPUMEM_MEMORY_MANAGER_ENTRY_POINT);
  if (symbol == nullptr) {
    char const* reason = ::dlerror();
    throw logic_error(what +
                      ": the library does not export " GPUMEM_MEMORY_MANAGER_ENTRY_POINT
                      " (use GPUMEM_EXPORT_MEMORY_MANAGER from gpumem/manager/plugin.hpp)" +
                      (reason ? std::string(": ") + reason : std::string()));
  }
  auto const entry = reinterpret_cast<gpumem_memory_manager_entry_point>(symbol);
  memory_manager_factory* const factory =
      detail::call_plugin(what + ": " GPUMEM_MEMORY_MANAGER_ENTRY_POINT, entry);
  GPUMEM_EXPECTS(factory != nullptr && *factory,
                 what + ": " GPUMEM_MEMORY_MANAGER_ENTRY_POINT " returned no factory");
  return *factory;
}

}  // namespace
}  // namespace detail

void register_memory_manager(std::string name, memory_manager_factory factory) {
  GPUMEM_EXPECTS(!name.empty() && name.find('/') == std::string::npos,
                 "register_memory_manager: invalid name '" + name + "' (non-empty, without '/')");
  GPUMEM_EXPECTS(static_cast<bool>(factory),
                 "register_memory_manager: the factory of '" + name + "' is empty");
  detail::registry& r = detail::the_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[std::move(name)] = std::move(factory);
}

std::vector<std::string> registered_memory_managers() {
  detail::registry& r = detail::the_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (auto const& entry : r.factories)
    names.push_back(entry.first);
  return names;
}

memory_manager_factory load_memory_manager(std::string const& value, std::string const& origin) {
  // A name is text: past a NUL byte, a path would be cut (dlopen("/x/lib.so\0junk") loads
  // /x/lib.so) and so would every message that quotes it.
  std::string const source = origin.empty() ? std::string("GPUMEM_MEMORY_MANAGER") : origin;
  if (std::size_t const nul = value.find('\0'); nul != std::string::npos)
    throw logic_error(source + ": the name '" + value.substr(0, nul) +
                      "\\0...' holds a NUL byte at offset " + std::to_string(nul) + " (of " +
                      std::to_string(value.size()) + " bytes)");
  std::string const name = value.empty() ? "default" : value;
  std::string const what =
      origin.empty() ? "GPUMEM_MEMORY_MANAGER=" + name : origin + "('" + name + "')";
  memory_manager_factory factory;
  if (detail::is_library_path(name)) {
    factory = detail::load_plugin_library(name, what);
  } else {
    detail::registry& r = detail::the_registry();
    std::unique_lock<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      lock.unlock();
      throw logic_error(
          what + ": unknown memory manager; the built-in managers are " + detail::names_joined() +
          ", or give the path of a shared library that exports " GPUMEM_MEMORY_MANAGER_ENTRY_POINT);
    }
    factory = it->second;
  }
  check_memory_manager_version(factory, what);
  return factory;
}

}  // namespace gpumem
