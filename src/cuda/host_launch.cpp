// The host side of gpumem::launch: runs a grid's blocks in parallel on host threads, in stream
// order (the whole grid is one task of the stream).
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/launch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace gpumem::detail {

namespace {
void run_blocks(unsigned blocks, std::function<void(unsigned)> const& body) {
  unsigned const workers =
      std::min<unsigned>(blocks, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<unsigned> next{0};
  auto worker = [&] {
    for (unsigned b = next.fetch_add(1); b < blocks; b = next.fetch_add(1)) {
      try {
        body(b);
      } catch (std::exception const& e) {
        log(log_level::error, std::string("device code threw on the host backend: ") + e.what());
      } catch (...) {
        log(log_level::error, "device code threw on the host backend");
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers > 0 ? workers - 1 : 0);
  for (unsigned i = 1; i < workers; ++i)
    threads.emplace_back(worker);
  worker();
  for (auto& t : threads)
    t.join();
}
}  // namespace

void host_launch_blocks(stream_handle stream, unsigned blocks, std::function<void(unsigned)> body) {
  backend().enqueue_host_function(stream,
                                  [blocks, body = std::move(body)] { run_blocks(blocks, body); });
}

void throw_launch_not_compiled() {
  throw not_supported(
      "gpumem::launch on the cuda backend from a translation unit not compiled by nvcc; compile "
      "it as CUDA or use GPUMEM_DEVICE=host");
}

}  // namespace gpumem::detail
