// Per-process cache of cudaDeviceProp (see cuda_device_properties.hpp).
#include "cuda_device_properties.hpp"

#if GPUMEM_HAS_CUDA

#include "cuda_check.hpp"

#include <memory>
#include <mutex>
#include <string>

namespace gpumem::detail {

namespace {
struct cached_device {
  std::once_flag once;
  cudaDeviceProp properties{};
};

struct device_table {
  int count = 0;
  std::unique_ptr<cached_device[]> devices;
};

device_table& table() {
  static device_table t = [] {
    device_table result;
    if (cudaGetDeviceCount(&result.count) != cudaSuccess) {
      (void)cudaGetLastError();
      result.count = 0;
    }
    result.devices = std::make_unique<cached_device[]>(static_cast<std::size_t>(result.count));
    return result;
  }();
  return t;
}
}  // namespace

cudaDeviceProp const& cuda_device_properties(int ordinal) {
  device_table& t = table();
  if (ordinal < 0 || ordinal >= t.count)
    throw_cuda_error(cudaErrorInvalidDevice, "cudaGetDeviceProperties", __FILE__, __LINE__,
                     "device " + std::to_string(ordinal) + " does not exist (" +
                         std::to_string(t.count) + " CUDA devices)");
  cached_device& entry = t.devices[static_cast<std::size_t>(ordinal)];
  // call_once re-arms when the callable throws, so a transient failure is retried next time.
  std::call_once(entry.once, [&] {
    GPUMEM_CUDA_CHECK(cudaGetDeviceProperties(&entry.properties, ordinal),
                      "cudaGetDeviceProperties");
  });
  return entry.properties;
}

std::string cuda_device_label(int ordinal) {
  return "cuda device " + std::to_string(ordinal) + " (" + cuda_device_properties(ordinal).name +
         ")";
}

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
