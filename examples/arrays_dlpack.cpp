// DLPack: export a device array view to another library and import it back without copies.
#include <gpumem/array/dlpack_interop.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());
  std::vector<int> host(12);
  std::iota(host.begin(), host.end(), 0);
  auto m = to_device(host, {3, 4});
  auto columns = m.slice({slice::all(), slice{0, 4, 2}});

  dlpack::DLManagedTensor* t = to_dlpack(columns);  // what __dlpack__() would hand out
  std::printf(
      "DLPack: device type %d, ndim %d, shape (%lld, %lld), strides (%lld, %lld) elements\n",
      static_cast<int>(t->dl_tensor.device.device_type), t->dl_tensor.ndim,
      static_cast<long long>(t->dl_tensor.shape[0]), static_cast<long long>(t->dl_tensor.shape[1]),
      static_cast<long long>(t->dl_tensor.strides[0]),
      static_cast<long long>(t->dl_tensor.strides[1]));
  auto imported = from_dlpack<int>(t);  // gpumem owns t now and calls its deleter later
  std::printf("imported back: ");
  for (int x : imported.copy_to_host())
    std::printf("%d ", x);
  std::printf("(shares memory with the original: use_count %ld)\n", m.use_count());
  return 0;
}
