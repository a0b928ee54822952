// Pinned, mapped and managed arrays, and the pinned()/mapped() scopes over existing memory.
#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/array/pin_scope.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>
#include <vector>

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());
  auto s = stream::create();

  pinned_array<double> staging({4});
  for (int i = 0; i < 4; ++i)
    staging(i) = i * 1.5;
  device_array<double> d({4});
  copy(d, staging, s);  // truly asynchronous: the source is page-locked
  s.synchronize();
  std::printf("pinned -> device -> host: %g %g %g %g\n", d.copy_to_host()[0], d.copy_to_host()[1],
              d.copy_to_host()[2], d.copy_to_host()[3]);

  mapped_array<int> flags({2});
  flags(0) = 1;
  flags(1) = 2;
  std::printf("mapped array: host %p, device %p\n", static_cast<void*>(flags.data()),
              static_cast<void*>(flags.view().data()));

  managed_array<float> shared({2, 2});
  shared(1, 1) = 4.f;
  std::printf("managed array: one address for host and device (%s)\n",
              shared.data() == shared.view().data() ? "yes" : "no");

  std::vector<float> big(1 << 16, 1.f);
  for (int round = 0; round < 2; ++round) {  // the same memory pinned twice in a row
    auto pin = pinned(host_span<float>(big));
    device_array<float> target({big.size()});
    target.copy_to_device(big, s);
    s.synchronize();
    std::printf("round %d: copied %zu floats from pinned user memory\n", round, big.size());
  }
  {
    auto map = mapped(host_span<float>(big));
    std::printf("mapped scope: kernels can use %p\n",
                static_cast<void*>(map.array().view().data()));
  }
  return 0;
}
