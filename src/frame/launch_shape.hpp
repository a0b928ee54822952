// Launch shapes of the frame layer's kernels (src/frame, not installed). Every kernel of the layer
// runs on the default stream, and each operation waits for it before returning (column_ops.hpp).
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>

#include <algorithm>
#include <cstddef>

namespace gpumem::frame::detail {

inline constexpr unsigned block_size = 256;
// The most threads one launch of a data-parallel pass runs (reduce's grid-stride passes, cumsum's
// chunks): beyond it, threads take more rows each.
inline constexpr std::size_t max_threads = 16384;

// At least `threads` threads (at least one) on the default stream: a whole number of blocks of at
// most block_size threads, one block of `threads` threads when fewer. Kernels check their index
// against their item count: the last block may run past it.
inline launch_config covering(std::size_t threads) {
  threads = std::max<std::size_t>(threads, 1);
  unsigned const block = static_cast<unsigned>(std::min<std::size_t>(block_size, threads));
  return {static_cast<unsigned>((threads + block - 1) / block), block, stream_handle{}};
}

// The threads a launch with `config` runs.
inline std::size_t threads_of(launch_config const& config) {
  return static_cast<std::size_t>(config.grid) * config.block;
}

// Waits for the layer's kernels (the default stream).
inline void synchronize() {
  backend().synchronize_stream(stream_handle{});
}

}  // namespace gpumem::frame::detail
