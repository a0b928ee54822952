// gpumem/nrt/launch.hpp
//
// nrt::launch(ms, config, f): gpumem::launch with `ms` as the current NRT memory system of the
// launched code, so that NRT_Allocate, NRT_decref, nrt::make_ref ... inside `f` use ms's heap,
// statistics and error words.
//
// How: on the cuda backend the current memory system is a __device__ pointer of the calling
// translation unit's module (no relocatable device code: one copy per .cu file). When it is not
// already `ms` (remembered per translation unit and per memsys id), a one-thread kernel of this
// translation unit sets it, on config.stream, before the grid: stream-ordered and cheap. On the
// host backend every simulated thread sets its thread-local pointer around `f`.
//
// Consequences: kernels of one translation unit that run concurrently on different streams must
// use the same memsys on the cuda backend (as Numba's NRT has one memsys per context). Launching
// NRT code with plain gpumem::launch leaves it without a memory system (allocations return null).
// Everything is in an unnamed namespace so that the kernels and the pointer they read belong to
// the translation unit that includes this header.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/detail/memsys_state.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <atomic>
#include <cstdint>

namespace gpumem::nrt {
namespace {

template <class F>
struct with_memsys {
  detail::memsys_state* state;
  F f;
  GPUMEM_HD void operator()(thread_index const& t) const {
#if GPUMEM_DEVICE_PASS
    f(t);
#else
    detail::memsys_state*& current = detail::host_current_memsys();
    detail::memsys_state* const previous = current;
    current = state;
    f(t);
    current = previous;
#endif
  }
};

struct bind_memsys {
  detail::memsys_state* state;
  GPUMEM_HD void operator()(thread_index const&) const {
#if GPUMEM_DEVICE_PASS
    detail::device_current_memsys = state;
#endif
  }
};

inline std::atomic<std::uint64_t>& bound_memsys_id() {
  static std::atomic<std::uint64_t> id{0};
  return id;
}

template <class F>
void launch(memsys& ms, launch_config const& config, F f) {
  if (backend().kind() == backend_kind::cuda &&
      bound_memsys_id().load(std::memory_order_acquire) != ms.id()) {
    launch_config one = config;
    one.grid = 1;
    one.block = 1;
    one.shared_bytes = 0;
    gpumem::launch(one, bind_memsys{ms.state()});
    bound_memsys_id().store(ms.id(), std::memory_order_release);
  }
  gpumem::launch(config, with_memsys<F>{ms.state(), f});
}

}  // namespace
}  // namespace gpumem::nrt
