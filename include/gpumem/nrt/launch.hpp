// gpumem/nrt/launch.hpp
//
// nrt::launch(ms, config, f): gpumem::launch with `ms` as the current NRT memory system of the
// launched code, so that NRT_Allocate, NRT_decref, nrt::make_ref ... inside `f` use ms's heap,
// statistics and error words.
//
// How: on the cuda backend the current memory system is a __device__ pointer of the calling
// translation unit's module (no relocatable device code: one copy per .cu file, and per device).
// Every launched thread stores `ms`'s state into it (when it does not already hold it) before it
// runs `f`, and then reads it in its own program order: whatever stream or device the launch goes
// to, and whatever ran there before, the launched code sees its own memory system, with no extra
// kernel and no host-side memory of earlier launches. On the host backend every simulated thread
// sets its thread-local pointer around `f`.
//
// Consequences: kernels of one translation unit that run concurrently (on different streams or
// devices sharing the module's pointer) must use the same memsys on the cuda backend: two grids
// with different memory systems would overwrite each other's pointer (as Numba's NRT has one memsys
// per context). Launching NRT code with plain gpumem::launch leaves it with no memory system on the
// host backend (allocations return null) and, on the cuda backend, with whatever the translation
// unit's last nrt::launch set (perhaps a destroyed memsys): always use nrt::launch for NRT code.
// Everything is in an unnamed namespace so that the kernels and the pointer they read belong to
// the translation unit that includes this header.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/detail/memsys_state.hpp>
#include <gpumem/nrt/memsys.hpp>

namespace gpumem::nrt {
namespace {

template <class F>
struct with_memsys {
  detail::memsys_state* state;
  F f;
  GPUMEM_HD void operator()(thread_index const& t) const {
#if GPUMEM_DEVICE_PASS
    // A load first: the store (every thread of every launch with the same value) happens only
    // when the memory system changed, so the common case costs one cached load.
    if (detail::device_current_memsys != state) detail::device_current_memsys = state;
    f(t);
#else
    // Restored on every way out, an exception from `f` included: the simulated thread goes on to
    // run other launches' code, which must not find this memory system (perhaps destroyed by then).
    struct restore {
      detail::memsys_state*& current;
      detail::memsys_state* const previous;
      ~restore() { current = previous; }
    };
    detail::memsys_state*& current = detail::host_current_memsys();
    restore const guard{current, current};
    current = state;
    f(t);
#endif
  }
};

template <class F>
void launch(memsys& ms, launch_config const& config, F f) {
  gpumem::launch(config, with_memsys<F>{ms.state(), f});
}

// gpumem::launch_bounded (cuda/launch.hpp) with `ms` as the memory system.
template <unsigned MaxBlock, unsigned MinBlocksPerSm, class F>
void launch_bounded(memsys& ms, launch_config const& config, F f) {
  gpumem::launch_bounded<MaxBlock, MinBlocksPerSm>(config, with_memsys<F>{ms.state(), f});
}

}  // namespace
}  // namespace gpumem::nrt
