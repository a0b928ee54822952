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
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace gpumem::python {

namespace nb = nanobind;

inline stream_handle to_stream(std::uintptr_t value) {
  return reinterpret_cast<stream_handle>(value);  // NOLINT: handles cross as integers
}

// The GIL released around work that may wait (as nb::call_guard<gil_release>, or a scope), as
// nb::gil_scoped_release does, but safe at exit. Before Python 3.14, a thread that asks for the GIL
// once the interpreter finalises is ended there (pthread_exit), and the unwinding through this
// destructor (noexcept) and nanobind's handlers aborted the process whenever a daemon thread was
// in flush() or close() at exit. So the extension's atexit handler (threads.cpp) marks the exit
// and waits, without the GIL, until every thread inside a gil_release has either taken the GIL
// back or, done after the mark, parked: a thread other than the main one never takes the GIL back
// after the mark but waits for the process to end. It holds nothing of gpumem's by then: what is
// taken inside a gil_release is let go before it ends, or by the function given to
// before_parking (context_use's shared lock of contexts_mutex, which waits inside one).
class gil_release {
 public:
  gil_release();
  ~gil_release();
  gil_release(gil_release const&) = delete;
  gil_release& operator=(gil_release const&) = delete;

  // Called (without the GIL, under the bookkeeping's mutex) if the thread parks at its end.
  void before_parking(void (*release)() noexcept) noexcept { before_parking_ = release; }

 private:
  PyThreadState* state_;
  void (*before_parking_)() noexcept = nullptr;
};

// The extension's uses of gpumem's contexts against their destruction. C++'s rule (context.hpp:
// close() must not race with threads still using the contexts it destroys) does not hold by itself
// in Python: close(), close_for_device_reset(), set_memory_manager() and reset_memory_managers()
// release the GIL while they wait for the device, so another Python thread could allocate from a
// context being destroyed. Every use of a context from the extension (get_context or find_context
// and the calls on what it returns) holds a context_use; those four hold a context_change. Neither
// may be held while Python code runs (a finalizer of ours could take it again).
std::shared_mutex& contexts_mutex() noexcept;

// Shared: waits with the GIL released if a change is in progress (the change may need the GIL,
// through host callbacks of the streams it waits for).
class context_use {
 public:
  context_use();
  ~context_use() { contexts_mutex().unlock_shared(); }
  context_use(context_use const&) = delete;
  context_use& operator=(context_use const&) = delete;
};

// Exclusive: taken without the GIL (the functions that hold it release the GIL first).
class context_change {
 public:
  context_change() : lock_(contexts_mutex()) {}

 private:
  std::unique_lock<std::shared_mutex> lock_;
};

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

// The exit's handling of the threads inside a gil_release (threads.cpp).
void add_thread_handling(nb::module_& m);

}  // namespace gpumem::python
