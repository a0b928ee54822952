// The host side of gpumem::launch: runs a grid's blocks in parallel on host threads, in stream
// order (the whole grid is one task of the stream).
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/launch.hpp>

#include <algorithm>
#include <atomic>
#include <string>
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

void check_host_launch_shape(unsigned grid, unsigned block) {
  // The limits of every CUDA device since compute capability 3.0 (maxThreadsPerBlock,
  // maxGridSize[0]); CUDA 13 reports a launch beyond them as cudaErrorInvalidValue.
  constexpr unsigned max_block = 1024, max_grid = 2147483647u;
  if (block > max_block)
    throw cuda_error(1, "cudaErrorInvalidValue", "launch (host backend)", __FILE__, __LINE__,
                     "a block of " + std::to_string(block) +
                         " threads; a CUDA device runs at most " + std::to_string(max_block));
  if (grid > max_grid)
    throw cuda_error(1, "cudaErrorInvalidValue", "launch (host backend)", __FILE__, __LINE__,
                     "a grid of " + std::to_string(grid) + " blocks; a CUDA device runs at most " +
                         std::to_string(max_grid));
}

void throw_launch_not_compiled() {
  throw not_supported(
      "gpumem::launch on the cuda backend from a translation unit not compiled by nvcc; compile "
      "it as CUDA or use GPUMEM_DEVICE=host");
}

}  // namespace gpumem::detail
