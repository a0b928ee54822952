// The cuda backend (CUDA runtime). Placeholder until the cuda backend lands: built without CUDA,
// gpumem reports that no CUDA device is available.
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

namespace gpumem {
namespace detail {
bool probe_cuda_device() noexcept {
  return false;
}
}  // namespace detail

std::unique_ptr<device_backend> make_cuda_backend() {
  throw not_supported("the cuda backend is not built");
}
}  // namespace gpumem
