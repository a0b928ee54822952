// Internals shared by the sources of the gpumem._gpumem extension (module.cpp binds the manager
// layer; numba_pointer.cpp, cupy_allocator.cpp and log_replay.cpp add the framework paths and the
// log replay to the same module). Not installed, not API.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>

namespace gpumem::python {

namespace nb = nanobind;

inline stream_handle to_stream(std::uintptr_t value) {
  return reinterpret_cast<stream_handle>(value);  // NOLINT: handles cross as integers
}

// Sets the Python error for a C++ exception of gpumem (the classes of gpumem/_errors.py, with
// their fields), as the extension's registered translator does: for C functions that nanobind
// does not call. Anything else becomes a RuntimeError.
void set_python_error(std::exception_ptr const& error) noexcept;

// The translator nanobind calls (registered by module.cpp).
void translate(std::exception_ptr const& error, void* payload);

// Pool options from the keyword arguments of set_memory_manager and replay_log.
pool_options make_pool_options(std::size_t initial_size, std::size_t chunk_size,
                               std::optional<std::size_t> maximum_size, std::size_t max_cached_size,
                               bool expandable, bool trim_before_growth, bool wait_across_streams);

// Blocks of `device` in the PyTorch bridge's table of owners (torch_allocator.cpp; the ordinals
// past its per-device slots share one count): for tests.
std::size_t torch_table_blocks(int device) noexcept;

// The framework paths, each adding its functions (and types) to the module; the allocation type
// they share first (block_allocation.hpp).
void add_block_allocation(nb::module_& m);
void add_numba_pointer(nb::module_& m);
void add_cupy_allocator(nb::module_& m);
void add_log_replay(nb::module_& m);

}  // namespace gpumem::python
