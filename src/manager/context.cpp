#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>

#include "plugin_calls.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {

namespace {

void check_device(int device) {
  int const count = backend().device_count();
  GPUMEM_EXPECTS(device >= 0 && device < count, "context: device " + std::to_string(device) +
                                                    " does not exist (" + std::to_string(count) +
                                                    " device(s))");
}

// The process table. Never destroyed as a static (a user's static or thread_local that owns
// memory may be destroyed after it). Instead the first context created registers an atexit handler
// that closes every context, flushing their deferred frees (the backend is never destroyed: frees
// that come later still have it). Nothing is left for the driver to reclaim, and tools such as
// compute-sanitizer's leak check see a clean exit.
struct context_table {
  std::recursive_mutex mutex;
  std::map<int, std::unique_ptr<context>> contexts;
  memory_manager_factory explicit_factory;  // set_memory_manager
  std::optional<memory_manager_factory>
      environment_factory;  // GPUMEM_MEMORY_MANAGER, resolved once
  // The devices whose context is being created now (by the thread holding the mutex): a manager's
  // factory or initialize() that asks for that context again (get_context, current_context) is an
  // error, not a second creation of it, and so on until the stack overflows.
  std::vector<int> creating;
};

context_table& table() {
  static context_table* const instance = new context_table();
  return *instance;
}

// get_context's fast path: the contexts of the first devices, read without the table's mutex
// (every allocation of the Python bridges looks its context up). Written under the mutex when a
// context is created or destroyed; the thread rule of close() (no thread may still use a context it
// destroys) is what makes a lock-free read of a pointer being cleared harmless.
constexpr int fast_devices = 64;
std::atomic<context*> fast_contexts[fast_devices] = {};

void publish(int device, context* ctx) noexcept {
  if (device >= 0 && device < fast_devices)
    fast_contexts[device].store(ctx, std::memory_order_release);
}

memory_manager_factory factory_locked(context_table& t) {
  if (t.explicit_factory) return t.explicit_factory;
  if (!t.environment_factory)
    t.environment_factory = load_memory_manager(environment_snapshot().memory_manager);
  return *t.environment_factory;
}

}  // namespace

context::context(int device, probe_tag)
    : device_(device),
      deallocations_(std::make_shared<gpumem::pending_deallocations>(0, 0)),
      resource_releases_(std::make_shared<gpumem::pending_deallocations>(0, 0)) {}

context::context(int device, memory_manager_factory const& factory) : device_(device) {
  GPUMEM_EXPECTS(static_cast<bool>(factory), "context: the memory manager factory is empty");
  check_device(device);
  environment const env = environment_snapshot();
  std::size_t total = 0;
  {
    detail::scoped_device on_total(device);
    total = backend().get_memory_info().total;
  }
  std::size_t const max_bytes =
      pending_deallocations::max_bytes_for(total, env.max_pending_deallocs_ratio);
  deallocations_ =
      std::make_shared<gpumem::pending_deallocations>(env.max_pending_deallocs_count, max_bytes);
  resource_releases_ =
      std::make_shared<gpumem::pending_deallocations>(env.max_pending_deallocs_count, max_bytes);
  // The manager is made and initialised with the context's device current (the EMM's rule: its
  // methods run in the context that owns it), whichever device the caller has current.
  detail::scoped_device on_device(device);
  manager_ = factory(*this);
  GPUMEM_EXPECTS(manager_ != nullptr, "context: the memory manager factory returned null");
  manager_->initialize();
}

context::~context() {
  // Frees first, while the manager still exists; pointers that outlive us release at once.
  deallocations_->close();
  resource_releases_->close();
  manager_.reset();
}

device_identity context::identity() const {
  return backend().identity(device_);
}

void context::make_current() const {
  backend().set_current_device(device_);
}

gpumem::memory_manager& context::memory_manager() const {
  GPUMEM_EXPECTS(manager_ != nullptr,
                 "context::memory_manager: this is set_memory_manager's probe context, which has "
                 "no manager (a manager's constructor must not allocate)");
  return *manager_;
}

context& get_context(int device) {
  if (device >= 0 && device < fast_devices)
    if (context* const known = fast_contexts[device].load(std::memory_order_acquire)) return *known;
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  auto it = t.contexts.find(device);
  if (it != t.contexts.end()) return *it->second;
  check_device(device);
  static bool const closes_at_exit = [] {
    (void)backend();  // chosen before contexts exist; never destroyed (backend.cpp)
    return std::atexit([] { close(); }) == 0;
  }();
  (void)closes_at_exit;
  GPUMEM_EXPECTS(std::find(t.creating.begin(), t.creating.end(), device) == t.creating.end(),
                 "get_context: the context of device " + std::to_string(device) +
                     " is being created: its memory manager's factory or initialize() asked for "
                     "it (use memory_manager::owning_context())");
  t.creating.push_back(device);
  std::unique_ptr<context> created;
  try {
    created = std::make_unique<context>(device, factory_locked(t));
  } catch (...) {
    t.creating.pop_back();
    throw;
  }
  t.creating.pop_back();
  context& result = *created;
  t.contexts.emplace(device, std::move(created));
  publish(device, &result);
  return result;
}

context* find_context(int device) noexcept {
  if (device >= 0 && device < fast_devices)
    if (context* const known = fast_contexts[device].load(std::memory_order_acquire)) return known;
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  auto const it = t.contexts.find(device);
  return it != t.contexts.end() ? it->second.get() : nullptr;
}

context& current_context() {
  return get_context(backend().current_device());
}

void check_memory_manager_version(memory_manager_factory const& factory, std::string const& what) {
  GPUMEM_EXPECTS(static_cast<bool>(factory), "memory manager " + what + ": the factory is empty");
  context probe(0, context::probe_tag{});
  // The plugin's own code: its factory, constructor, interface_version() and name().
  std::unique_ptr<memory_manager> instance;
  int version = 0;
  std::string name;
  detail::call_plugin("memory manager " + what + ": probing the manager", [&] {
    instance = factory(probe);
    if (instance != nullptr) {
      version = instance->interface_version();
      name = instance->name();
    }
  });
  GPUMEM_EXPECTS(instance != nullptr, "memory manager " + what + ": the factory returned null");
  GPUMEM_EXPECTS(version == memory_manager_interface_version,
                 "memory manager " + what + " (" + name + "): EMM Plugin interface has version " +
                     std::to_string(version) + " - version " +
                     std::to_string(memory_manager_interface_version) + " required");
}

void set_memory_manager(memory_manager_factory factory) {
  if (factory) check_memory_manager_version(factory, "given to set_memory_manager");
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  t.explicit_factory = std::move(factory);
  // An empty factory returns to the environment, re-read at the next context creation.
  if (!t.explicit_factory) t.environment_factory.reset();
}

memory_manager_factory current_memory_manager_factory() {
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  return factory_locked(t);
}

void close() {
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  std::map<int, std::unique_ptr<context>> doomed;
  doomed.swap(t.contexts);
  for (auto const& entry : doomed)
    publish(entry.first, nullptr);
  doomed.clear();  // destroyed under the lock so no thread sees a half-closed table
}

namespace {
void close_one(int device, context_end why) {
  context_table& t = table();
  std::lock_guard<std::recursive_mutex> lock(t.mutex);
  auto it = t.contexts.find(device);
  if (it == t.contexts.end()) return;
  std::unique_ptr<context> doomed = std::move(it->second);
  t.contexts.erase(it);
  publish(device, nullptr);
  detail::end_context(std::move(doomed), why);  // under the lock, as close()
}
}  // namespace

void detail::end_context(std::unique_ptr<context> doomed, context_end why) noexcept {
  if (!doomed) return;
  doomed->ending_ = why;
  std::shared_ptr<std::atomic<bool>> const reset = doomed->device_reset_;
  doomed.reset();  // the queues flush first, with the device still usable (~context)
  // Set after: what is released from here on belongs to live pointers, whose memory the reset
  // takes (host_only_memory_manager::unless_device_reset, IPC mappings).
  if (why == context_end::device_reset) reset->store(true);
}

void close(int device) {
  close_one(device, context_end::retire);
}

void close_for_device_reset(int device) {
  close_one(device, context_end::device_reset);
}

}  // namespace gpumem
