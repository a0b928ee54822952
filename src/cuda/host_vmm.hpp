// Internal to the host backend: the virtual-memory operations (vmm_registry.hpp) on a simulated
// device.
//
//   reserve    an anonymous PROT_NONE, MAP_NORESERVE mapping aligned to the granularity: address
//              space only, every access faults, as on an unmapped part of a GPU reservation;
//   create     a page-aligned range of the host arena, so the device's capacity limit applies and
//              running out is the arena's own gpumem::out_of_memory;
//   map        the arena's memfd mapped MAP_SHARED | MAP_FIXED at the chunk's offset over the
//              reservation: the bytes are the arena's bytes (a chunk mapped twice shows the same
//              data at both addresses, as in CUDA);
//   unmap      anonymous PROT_NONE memory mapped back over the range with MAP_FIXED (the range
//              stays reserved; the chunk keeps its data in the arena);
//   release    the range goes back to the arena.
//
// The granularity is 2 MiB, a current GPU's, so tests behave alike on both backends. The operations
// trust their input (the registry has checked it) and report system-call failures as cuda_error
// with cudaErrorMapBufferObjectFailed. Thread safety: stateless apart from the arena, which locks.
#pragma once

#include "host_arena.hpp"
#include "vmm_registry.hpp"

#include <cstddef>
#include <memory>

namespace gpumem::detail::host {

constexpr std::size_t vmm_granularity = std::size_t{2} << 20;

// `arena` must outlive the operations.
std::unique_ptr<vmm_operations> make_host_vmm_operations(host_arena& arena);

}  // namespace gpumem::detail::host
