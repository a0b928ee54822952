// gpumem/cuda/launch.hpp
//
// One launch entry for device code that runs on both backends:
//
//   gpumem::launch({grid, block, stream}, [=] GPUMEM_HD (gpumem::thread_index const& t) { ... });
//
// On the cuda backend (in a translation unit compiled by nvcc) this is a kernel launch. On the host
// backend it enqueues, in stream order, a task that runs every (block, thread) pair on a host
// thread pool: blocks run in parallel, the threads of one block run one after another on one host
// thread. Consequences for code that must run on both: no __syncthreads() and no shared memory
// across threads of a block; warp-level operations go through helpers that have a host equivalent
// (on the host a warp has one active lane). Device code never throws; it reports through memory it
// writes.
//
// The functor is taken by value and must be trivially copyable for the device (as any kernel
// argument). Errors of the launch itself become gpumem::cuda_error.
//
// launch_bounded<MaxBlock, MinBlocksPerSm>(config, f) is the same launch for device code with a
// large frame (a UDF calling many inlined string functions, say), whose register count the
// compiler would otherwise pick so high that most of an SM stays idle: the kernel is compiled to
// fit MinBlocksPerSm blocks of MaxBlock threads on one SM (at most 65536 / (MaxBlock *
// MinBlocksPerSm) registers a thread; the rest spills to local memory). config.block above
// MaxBlock is a logic_error naming both. The host backend runs it as launch() does.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace gpumem {

struct launch_config {
  unsigned grid = 1;   // blocks
  unsigned block = 1;  // threads per block
  stream_handle stream = nullptr;
  std::size_t shared_bytes = 0;  // dynamic shared memory (cuda backend only)
};

struct thread_index {
  unsigned block;
  unsigned thread;
  unsigned grid_dim;
  unsigned block_dim;
  GPUMEM_HD unsigned long long global() const {
    return static_cast<unsigned long long>(block) * block_dim + thread;
  }
  GPUMEM_HD unsigned long long total() const {
    return static_cast<unsigned long long>(grid_dim) * block_dim;
  }
};

namespace detail {

// Runs body(block) for block in [0, blocks) on the host thread pool, in stream order on `stream`.
// Returns when the task has been enqueued (like a kernel launch).
void host_launch_blocks(stream_handle stream, unsigned blocks, std::function<void(unsigned)> body);
// Refuses, as a CUDA device does, a shape no device launches (more than 1024 threads in a block,
// more than 2^31 - 1 blocks): cuda_error cudaErrorInvalidValue naming the value, so that a launch
// that fails on a GPU fails on the host backend too.
void check_host_launch_shape(unsigned grid, unsigned block);

// Throws gpumem::cuda_error for a failed launch (defined by the cuda backend).
void check_last_launch(char const* what);
// Throws gpumem::cuda_error when `status` (a cudaError_t read by the launching translation unit) is
// not cudaSuccess. launch() reads the status itself because the launching executable may hold its
// own copy of the static CUDA runtime, whose last-error slot the library's copy cannot see.
void check_launch_status(int status, char const* what);

[[noreturn]] void throw_launch_not_compiled();

#if defined(__CUDACC__)
template <class F>
__global__ void launch_kernel(F f) {
  thread_index const t{blockIdx.x, threadIdx.x, gridDim.x, blockDim.x};
  f(t);
}

template <unsigned MaxBlock, unsigned MinBlocks, class F>
__global__ void __launch_bounds__(MaxBlock, MinBlocks) launch_kernel_bounded(F f) {
  thread_index const t{blockIdx.x, threadIdx.x, gridDim.x, blockDim.x};
  f(t);
}
#endif

// The parts of launch() around the kernel itself: checks the configuration, and runs `f` on the
// host backend. True when there is nothing left to do (nothing to launch, or run on the host).
template <class F>
bool launch_without_kernel(launch_config const& config, F const& f) {
  GPUMEM_EXPECTS(config.block > 0, "launch: block size must be positive");
  if (config.grid == 0) return true;
  if (backend().kind() != backend_kind::host) return false;
  check_host_launch_shape(config.grid, config.block);
  unsigned const block_dim = config.block;
  unsigned const grid_dim = config.grid;
  host_launch_blocks(config.stream, grid_dim, [f, block_dim, grid_dim](unsigned b) {
    F local = f;
    for (unsigned t = 0; t < block_dim; ++t)
      local(thread_index{b, t, grid_dim, block_dim});
  });
  return true;
}

}  // namespace detail

template <class F>
void launch(launch_config const& config, F f) {
  if (detail::launch_without_kernel(config, f)) return;
#if defined(__CUDACC__)
  detail::launch_kernel<<<config.grid, config.block, config.shared_bytes,
                          reinterpret_cast<cudaStream_t>(config.stream)>>>(f);
  detail::check_launch_status(static_cast<int>(cudaGetLastError()), "launch");
#else
  detail::throw_launch_not_compiled();
#endif
}

template <unsigned MaxBlock, unsigned MinBlocksPerSm, class F>
void launch_bounded(launch_config const& config, F f) {
  static_assert(MaxBlock > 0 && MaxBlock <= 1024 && MinBlocksPerSm > 0,
                "launch_bounded: MaxBlock must be in [1, 1024], MinBlocksPerSm positive");
  GPUMEM_EXPECTS(config.block <= MaxBlock, "launch: a block of " + std::to_string(config.block) +
                                               " threads exceeds this kernel's bound of " +
                                               std::to_string(MaxBlock));
  if (detail::launch_without_kernel(config, f)) return;
#if defined(__CUDACC__)
  detail::launch_kernel_bounded<MaxBlock, MinBlocksPerSm>
      <<<config.grid, config.block, config.shared_bytes,
         reinterpret_cast<cudaStream_t>(config.stream)>>>(f);
  detail::check_launch_status(static_cast<int>(cudaGetLastError()), "launch");
#else
  detail::throw_launch_not_compiled();
#endif
}

}  // namespace gpumem
