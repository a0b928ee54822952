// Selection of the process-wide backend (GPUMEM_DEVICE) and its replacement by tests.
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <mutex>

namespace gpumem {

namespace detail {
bool probe_cuda_device() noexcept;  // cuda_backend.cpp (false when built without CUDA)
}

namespace {
std::mutex& install_mutex() {
  static std::mutex m;
  return m;
}
std::unique_ptr<device_backend>& owned() {
  static std::unique_ptr<device_backend> backend;
  return backend;
}
std::atomic<device_backend*> current{nullptr};

std::unique_ptr<device_backend> make_from_environment() {
  environment const env = environment_snapshot();
  if (env.device == "host") {
    return make_host_backend(host_backend_options{env.host_device_capacity});
  }
  if (env.device == "cuda") {
    if (!cuda_device_available())
      throw not_supported("GPUMEM_DEVICE=cuda, but no CUDA device can be used here (gpumem built " +
                          std::string(GPUMEM_HAS_CUDA ? "with" : "without") +
                          " CUDA); use GPUMEM_DEVICE=host");
    return make_cuda_backend();
  }
  if (cuda_device_available()) return make_cuda_backend();
  return make_host_backend(host_backend_options{env.host_device_capacity});
}
}  // namespace

char const* to_string(backend_kind kind) noexcept {
  return kind == backend_kind::cuda ? "cuda" : "host";
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
