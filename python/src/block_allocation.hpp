// gpumem._gpumem.BlockAllocation: a plain C object (not a nanobind instance, which nanobind also
// enters in its table of instances) that owns one block of a device's memory manager. The framework
// paths in C make one per allocation and hand it to the framework's own pointer object, whose death
// frees the block: gpumem.numba's pointers (memalloc: freed through the context's deferred queue,
// the EMM rule) and CuPy's UnownedMemory (stream-ordered: freed on its stream). Internal to the
// extension.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <Python.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>

#include "module.hpp"

namespace gpumem::python {

struct block_memory {
  // Set: `ptr` is an unowned block of that manager (memory_manager::allocate_unowned or
  // memalloc_unowned: no owner record on the C++ side); otherwise `memory` holds it (managers
  // without an unowned path), or nothing (0 bytes).
  std::shared_ptr<unowned_blocks> blocks;
  memory_pointer memory;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  stream_handle stream = nullptr;
  int device = 0;
  bool deferred = false;           // memalloc's: through the deferred queue; else on `stream`
  per_thread_stream_owner thread;  // a per-thread-stream block freed by another thread: deferred

  block_memory() = default;
  block_memory(block_memory const&) = delete;
  block_memory& operator=(block_memory const&) = delete;
  ~block_memory();
};

// A BlockAllocation (a new reference) owning `bytes` of `device`'s manager: memalloc's memory
// when `stream` is empty, else stream-ordered on *stream. Null with the Python error set, or, when
// the manager ran out (after its own recovery), null with no Python error and the out_of_memory
// in `ran_out`. Needs the GIL.
PyObject* new_block_allocation(int device, std::size_t bytes, std::optional<stream_handle> stream,
                               std::exception_ptr& ran_out) noexcept;

// The device address a BlockAllocation owns (null for 0 bytes).
void* block_allocation_ptr(PyObject* allocation) noexcept;

// Makes the allocation hold a reference to `object` (not null) until it has freed its block: the
// framework's stream object, so that the stream outlives the frees ordered on it.
void block_allocation_keep(PyObject* allocation, PyObject* object) noexcept;

}  // namespace gpumem::python
