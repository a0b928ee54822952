// Dynamic shared memory without aliasing: one carver plans the byte count on the host and hands
// out disjoint, aligned typed views in the kernel (the spec's float32/int32 example).
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/array/shared_memory.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/cuda/launch.hpp>

#include <cstdint>
#include <cstdio>

namespace {

struct f_with_view {
  gpumem::array_view<float> out_f;
  gpumem::array_view<std::int32_t> out_i;
  std::size_t bytes;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    gpumem::shared_memory_carver c(gpumem::dynamic_shared_memory(), bytes);
    auto f32 = c.take<float>(1);
    auto i32 = c.take<std::int32_t>(1);
    if (c.failed() || f32.data() == nullptr) return;  // the host backend has no shared memory
    f32[0] = 3.14f;
    i32[0] = 1;
    out_f[0] = f32[0];
    out_i[0] = i32[0];
  }
};

}  // namespace

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());
  shared_memory_carver plan;
  plan.take<float>(1);
  plan.take<std::int32_t>(1);
  std::printf("launch with %zu bytes of dynamic shared memory\n", plan.bytes());
  if (backend().kind() != backend_kind::cuda) {
    std::printf("(host backend: no shared memory; the plan is all this example shows here)\n");
    return 0;
  }
  mapped_array<float> f({1});
  mapped_array<std::int32_t> i({1});
  auto s = stream::create();
  launch({1, 1, s.handle(), plan.bytes()}, f_with_view{f.view(), i.view(), plan.bytes()});
  s.synchronize();
  std::printf("%f\n%d\n", static_cast<double>(f(0)), i(0));
  return 0;
}
