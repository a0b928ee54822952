// Device arrays and transfers: to_device, slicing views, copy_to_host, Fortran order.
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());

  std::vector<float> host(12);
  std::iota(host.begin(), host.end(), 0.f);
  auto m = to_device(host, {3, 4});                   // a 3 x 4 C-order device array
  auto corner = m.slice({slice{1, 3}, slice{2, 4}});  // rows 1-2, columns 2-3: a view
  std::vector<float> part = corner.copy_to_host();
  std::printf("corner of the 3x4 matrix: %g %g / %g %g (the view shares memory: use_count %ld)\n",
              part[0], part[1], part[2], part[3], m.use_count());

  corner.copy_to_device(std::vector<float>{-1, -1, -1, -1});  // writes through the view
  auto back = m.copy_to_host();
  std::printf("row 1 after writing the view: %g %g %g %g\n", back[4], back[5], back[6], back[7]);

  auto f = to_device(host, {3, 4}, array_order::fortran);  // the host buffer is column-major
  std::printf("Fortran array row 0: ");
  for (float x : f.row(0).copy_to_host())
    std::printf("%g ", x);
  std::printf("\nzero-size array: %zu elements, data %p\n", device_array<int>({0}).size(),
              static_cast<void*>(device_array<int>({0}).data()));
  return 0;
}
