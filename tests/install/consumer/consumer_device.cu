// A CUDA program against gpumem: a kernel (a GPUMEM_HD lambda, so --extended-lambda must come with
// gpumem::gpumem) allocates from a device heap through the public device API. On a GPU it runs as
// a kernel; without one, or against a gpumem built without CUDA, on the host backend.
#include <gpumem/array/transfer.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <cstdio>
#include <exception>
#include <vector>

namespace {

bool run() {
  constexpr unsigned blocks = 8, threads = 64, n = blocks * threads;
  gpumem::nrt::device_heap heap(gpumem::nrt::heap_options{32 * gpumem::MiB});
  gpumem::nrt::heap_ref const h = heap.handle();
  auto out = gpumem::to_device(std::vector<unsigned>(n, 0));
  unsigned* const results = out.data();
  gpumem::launch({blocks, threads}, [=] GPUMEM_HD(gpumem::thread_index const& t) {
    auto const i = static_cast<unsigned>(t.global());
    auto* const p = static_cast<unsigned*>(gpumem::nrt::allocate(h, 16 * sizeof(unsigned)));
    if (p == nullptr) return;  // results[i] stays 0
    for (unsigned k = 0; k < 16; ++k)
      p[k] = i + k;
    unsigned sum = 0;
    for (unsigned k = 0; k < 16; ++k)
      sum += p[k];
    gpumem::nrt::deallocate(h, p);
    results[i] = sum;
  });
  std::vector<unsigned> const back = out.copy_to_host();
  heap.check();  // throws out_of_memory had an allocation returned null
  unsigned wrong = 0;
  for (unsigned i = 0; i < n; ++i)
    wrong += back[i] != 16 * i + 120 ? 1 : 0;
  heap.trim();
  std::size_t const held = heap.usage().used_bytes;
  std::printf("consumer_device: %u threads, %u wrong results, %zu bytes held after trim\n", n,
              wrong, held);
  return wrong == 0 && held == 0;
}

}  // namespace

int main() {
  try {
    std::printf("consumer_device: backend %s\n", gpumem::backend().description().c_str());
    bool const ok = run();
    gpumem::close();
    return ok ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "consumer_device: %s\n", e.what());
    return 1;
  }
}
