// Selection of the process-wide backend (GPUMEM_DEVICE) and its replacement by tests, and the
// base-class answers of device_backend's virtual-memory calls (for backends without it) and of
// stream_is_capturing (for backends without graphs).
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <mutex>
#include <string>

namespace gpumem {

namespace detail {
bool probe_cuda_device() noexcept;  // cuda_backend.cpp (false when built without CUDA)
}

namespace {
// Both are never destroyed: memory freed by the destructors of statics and thread_locals (a
// user's global array or memory pointer, destroyed after every function-local static of gpumem)
// still goes through the backend, so the backend outlives every other object of the process.
std::mutex& install_mutex() {
  static auto* const m = new std::mutex();
  return *m;
}
std::unique_ptr<device_backend>& owned() {
  static auto* const backend = new std::unique_ptr<device_backend>();
  return *backend;
}
std::atomic<device_backend*> current{nullptr};

// The host backend of GPUMEM_HOST_DEVICE_CAPACITY; a capacity this machine cannot map is an error
// that names the variable and its value.
std::unique_ptr<device_backend> make_host_backend_from(environment const& env) {
  try {
    return make_host_backend(host_backend_options{env.host_device_capacity});
  } catch (std::exception const& e) {
    throw logic_error("GPUMEM_HOST_DEVICE_CAPACITY=" + std::to_string(env.host_device_capacity) +
                      " bytes: the host backend cannot make a simulated device that large here (" +
                      e.what() + ")");
  }
}

std::unique_ptr<device_backend> make_from_environment() {
  environment const env = environment_snapshot();
  if (env.device == "host") return make_host_backend_from(env);
  if (env.device == "cuda") {
    if (!cuda_device_available())
      throw not_supported("GPUMEM_DEVICE=cuda, but no CUDA device can be used here (gpumem built " +
                          std::string(GPUMEM_HAS_CUDA ? "with" : "without") +
                          " CUDA); use GPUMEM_DEVICE=host");
    return make_cuda_backend();
  }
  if (cuda_device_available()) return make_cuda_backend();
  return make_host_backend_from(env);
}
}  // namespace

char const* to_string(backend_kind kind) noexcept {
  return kind == backend_kind::cuda ? "cuda" : "host";
}

namespace {
[[noreturn]] void no_virtual_memory(char const* call) {
  throw not_supported(std::string(call) +
                      ": this backend does not provide virtual memory management");
}
}  // namespace

std::size_t device_backend::vmm_granularity() {
  return 0;
}
void* device_backend::reserve_address_range(std::size_t) {
  no_virtual_memory("reserve_address_range");
}
void device_backend::release_address_range(void*, std::size_t) {
  no_virtual_memory("release_address_range");
}
physical_handle device_backend::create_physical(std::size_t) {
  no_virtual_memory("create_physical");
}
void device_backend::release_physical(physical_handle) {
  no_virtual_memory("release_physical");
}
void device_backend::map_physical(void*, std::size_t, physical_handle) {
  no_virtual_memory("map_physical");
}
void device_backend::unmap(void*, std::size_t) {
  no_virtual_memory("unmap");
}

bool device_backend::stream_is_capturing(stream_handle) {
  return false;  // no graphs
}

bool cuda_device_available() noexcept {
  return detail::probe_cuda_device();
}

device_backend& backend() {
  device_backend* b = current.load(std::memory_order_acquire);
  if (b != nullptr) return *b;
  std::lock_guard<std::mutex> lock(install_mutex());
  if (!owned()) {
    owned() = make_from_environment();
    current.store(owned().get(), std::memory_order_release);
  }
  return *owned();
}

std::unique_ptr<device_backend> install_backend(std::unique_ptr<device_backend> backend) {
  GPUMEM_EXPECTS(backend != nullptr, "install_backend: the backend must not be null");
  std::lock_guard<std::mutex> lock(install_mutex());
  std::unique_ptr<device_backend> previous = std::move(owned());
  owned() = std::move(backend);
  current.store(owned().get(), std::memory_order_release);
  return previous;
}

}  // namespace gpumem
