// gpumem._gpumem: the nanobind extension behind the gpumem Python package. Thin bindings of the
// manager layer: per-device manager choice, stream-ordered and EMM allocation, statistics,
// deferral, host memory, IPC export; gpumem's C++ errors become the Python exceptions of
// gpumem/_errors.py with their fields. The framework paths that must run without Python per call
// are C++ too, in their own files (numba_pointer.cpp, cupy_allocator.cpp, torch_allocator.cpp),
// and so is the log replay (log_replay.cpp); the Python modules around it (gpumem/*.py) hold the
// rest of the bridges. Allocation paths keep the GIL (they never block on the device, and
// releasing it costs more than they do); the calls that may wait for the device (flush, reset,
// close, close_for_device_reset, set_memory_manager, reset_memory_managers) release it, so that
// other Python threads, and host callbacks that need the GIL, go on meanwhile. Those that destroy
// contexts hold contexts_mutex() exclusively and every other use of a context holds it shared
// (module.hpp), so no Python thread uses a context while another destroys it; those mechanisms
// are in threads.cpp.
#include <gpumem/python/torch_allocator.h>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/manager/cleanup_guard.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "managers.hpp"
#include "module.hpp"

using namespace nanobind::literals;

namespace gpumem::python {
namespace {

int device_or_current(std::optional<int> device) {
  return device ? *device : backend().current_device();
}

memory_manager& manager_of(std::optional<int> device) {
  return get_context(device_or_current(device)).memory_manager();
}

// Device memory owned by a Python object: freed (through its manager, on its stream for
// stream-ordered memory) when the object dies or free() is called.
struct allocation {
  memory_pointer memory;
  int device = 0;
  std::uintptr_t ptr() const noexcept {
    return reinterpret_cast<std::uintptr_t>(memory.device_pointer());
  }
};

struct host_allocation {
  host_memory memory;
  int device = 0;
};

// defer_cleanup()'s guard; release() ends the deferral (idempotent).
struct deferral {
  cleanup_guard guard;
};

// Python exception classes live in gpumem/_errors.py; the translator raises them with fields.
void raise_python(char const* name, nb::object const& instance) {  // name: for readers
  (void)name;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
}

nb::object errors_module() {
  return nb::module_::import_("gpumem._errors");
}

}  // namespace

namespace {

// An error's text as a str: C++ messages may quote bytes that are not UTF-8 (a line of a binary
// file given as an allocation log, a path), which shown escaped keep the error its type.
nb::str message_of(std::exception const& e) {
  char const* const text = e.what();
  PyObject* const str =
      PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(std::strlen(text)), "backslashreplace");
  if (str == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(str);
}

}  // namespace

void translate(std::exception_ptr const& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (out_of_memory const& e) {
    nb::object cls = errors_module().attr("OutOfMemoryError");
    raise_python("OutOfMemoryError", cls(message_of(e), e.requested_bytes(), e.allocator(),
                                         e.current_bytes(), e.peak_bytes()));
  } catch (not_supported const& e) {
    raise_python("NotSupportedError", errors_module().attr("NotSupportedError")(message_of(e)));
  } catch (logic_error const& e) {
    raise_python("InvalidArgumentError",
                 errors_module().attr("InvalidArgumentError")(message_of(e)));
  } catch (cuda_error const& e) {
    nb::object cls = errors_module().attr("CudaError");
    raise_python("CudaError", cls(message_of(e), e.code(), e.code_name(), e.call()));
  } catch (error const& e) {
    raise_python("GpumemError", errors_module().attr("GpumemError")(message_of(e)));
  }
}

void set_python_error(std::exception_ptr const& error) noexcept {
  try {
    try {
      translate(error, nullptr);  // gpumem's errors
    } catch (nb::python_error& e) {
      e.restore();
    } catch (std::bad_alloc const&) {
      PyErr_NoMemory();
    } catch (std::exception const& e) {
      PyErr_SetObject(PyExc_RuntimeError, message_of(e).ptr());  // escaped, as translate's
    }
  } catch (...) {  // raised while making the Python exception
    if (PyErr_Occurred() == nullptr) PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

pool_options make_pool_options(std::size_t initial_size, std::size_t chunk_size,
                               std::optional<std::size_t> maximum_size, std::size_t max_cached_size,
                               bool expandable, bool trim_before_growth, bool wait_across_streams) {
  pool_options o;
  o.initial_size = initial_size;
  o.chunk_size = chunk_size;
  if (maximum_size) o.maximum_size = *maximum_size;
  o.max_cached_size = max_cached_size;
  o.expandable = expandable;
  o.trim_before_growth = trim_before_growth;
  o.wait_across_streams = wait_across_streams;
  return o;
}

namespace {

// (fields of memory_statistics in declaration order, manager name)
nb::dict statistics_of(std::optional<int> device) {
  int const dev = device_or_current(device);
  memory_statistics s;
  std::string name;
  {
    context_use use;
    memory_manager& m = get_context(dev).memory_manager();
    s = m.get_memory_statistics();
    name = m.name();
  }
  nb::dict d;
  d["device"] = dev;
  d["manager"] = name;
  d["bytes_in_use"] = s.bytes_in_use;
  d["peak_bytes"] = s.peak_bytes;
  d["held_bytes"] = s.held_bytes;
  d["allocations"] = s.allocations;
  d["total_allocations"] = s.total_allocations;
  d["out_of_memory_retries"] = s.out_of_memory_retries;
  d["pending_count"] = s.pending_count;
  d["pending_bytes"] = s.pending_bytes;
  d["retired_count"] = s.retired_count;
  d["retired_bytes"] = s.retired_bytes;
  return d;
}

}  // namespace
}  // namespace gpumem::python

NB_MODULE(_gpumem, m) {
  using namespace gpumem;
  using namespace gpumem::python;
  nb::register_exception_translator(&translate);
  add_thread_handling(m);
  add_block_allocation(m);
  add_numba_pointer(m);
  add_cupy_allocator(m);
  add_log_replay(m);

  nb::class_<allocation>(m, "Allocation",
                         "Device memory owned by this object: freed when it dies or on free().")
      .def_prop_ro("ptr", &allocation::ptr)
      .def_prop_ro("size", [](allocation const& a) { return a.memory.size(); })
      .def_ro("device", &allocation::device)
      .def(
          "free", [](allocation& a) { a.memory = memory_pointer(); },
          "Drops this reference now (idempotent); ptr is 0 afterwards. The memory goes back as the "
          "manager frees: at once in stream order for allocate(), through the deferred queue for "
          "memalloc() (the EMM rule; flush() or the queue's limits release it).")
      .def("__int__", &allocation::ptr)
      .def("__repr__", [](allocation const& a) {
        return "<gpumem.Allocation ptr=0x" +
               [&] {
                 char buf[32];
                 std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(a.ptr()));
                 return std::string(buf);
               }() +
               " size=" + std::to_string(a.memory.size()) + " device=" + std::to_string(a.device) +
               ">";
      });

  nb::class_<host_allocation>(m, "HostAllocation", "Pinned host memory owned by this object.")
      .def_prop_ro("ptr",
                   [](host_allocation const& h) {
                     return reinterpret_cast<std::uintptr_t>(h.memory.host_pointer());
                   })
      .def_prop_ro("size", [](host_allocation const& h) { return h.memory.size(); })
      .def_prop_ro("mapped", [](host_allocation const& h) { return h.memory.is_mapped(); })
      .def_prop_ro("device_ptr",
                   [](host_allocation const& h) {
                     // Freed: 0, as ptr (not "pinned but not mapped", which it may have been).
                     if (!h.memory) return std::uintptr_t{0};
                     return reinterpret_cast<std::uintptr_t>(h.memory.device_pointer());
                   })
      .def_ro("device", &host_allocation::device)
      .def("free", [](host_allocation& h) { h.memory = host_memory(); });

  nb::class_<deferral>(m, "Deferral", "A defer_cleanup() guard; release() ends it.")
      .def("release", [](deferral& d) { d.guard.reset(); });

  m.def("device_count", [] { return backend().device_count(); });
  m.def("current_device", [] { return backend().current_device(); });
  m.def("registered_memory_managers", &registered_memory_managers);
  // The pool options the Python package takes, with C++'s defaults (pool_options{}; None for an
  // unlimited maximum_size), in make_pool_options's order: the package's one source of them.
  m.def("pool_defaults", [] {
    pool_options const o;
    nb::dict d;
    d["initial_size"] = o.initial_size;
    d["chunk_size"] = o.chunk_size;
    bool const unlimited = o.maximum_size == std::numeric_limits<std::size_t>::max();
    d["maximum_size"] = unlimited ? nb::object(nb::none()) : nb::cast(o.maximum_size);
    d["max_cached_size"] = o.max_cached_size;
    d["expandable"] = o.expandable;
    d["trim_before_growth"] = o.trim_before_growth;
    d["wait_across_streams"] = o.wait_across_streams;
    return d;
  });

  m.def(
      "set_memory_manager",
      [](std::string name, std::optional<int> device, std::string log, std::size_t initial_size,
         std::size_t chunk_size, std::optional<std::size_t> maximum_size,
         std::size_t max_cached_size, bool expandable, bool trim_before_growth,
         bool wait_across_streams) {
        manager_spec spec;
        spec.name = std::move(name);
        spec.log_path = std::move(log);
        spec.pool = make_pool_options(initial_size, chunk_size, maximum_size, max_cached_size,
                                      expandable, trim_before_growth, wait_across_streams);
        context_change change;
        set_manager(spec, device);
      },
      "name"_a, "device"_a = nb::none(), "log"_a = "", "initial_size"_a = 0,
      "chunk_size"_a = pool_options{}.chunk_size, "maximum_size"_a = nb::none(),
      "max_cached_size"_a = pool_options{}.max_cached_size,
      "expandable"_a = pool_options{}.expandable,
      "trim_before_growth"_a = pool_options{}.trim_before_growth,
      "wait_across_streams"_a = pool_options{}.wait_across_streams, nb::call_guard<gil_release>());
  m.def(
      "reset_memory_managers",
      [] {
        context_change change;
        reset_managers();
      },
      nb::call_guard<gil_release>());
  m.def(
      "manager_name",
      [](std::optional<int> device) {
        context_use use;
        return manager_of(device).name();
      },
      "device"_a = nb::none());

  m.def(
      "memalloc",
      [](std::size_t bytes, std::optional<int> device) {
        int const dev = device_or_current(device);
        context_use use;
        return allocation{get_context(dev).memory_manager().memalloc(bytes), dev};
      },
      "bytes"_a, "device"_a = nb::none());
  m.def(
      "allocate",
      [](std::size_t bytes, std::uintptr_t stream, std::optional<int> device) {
        int const dev = device_or_current(device);
        context_use use;
        return allocation{get_context(dev).memory_manager().allocate(bytes, to_stream(stream)),
                          dev};
      },
      "bytes"_a, "stream"_a = 0, "device"_a = nb::none());
  m.def(
      "memhostalloc",
      [](std::size_t bytes, bool mapped, bool portable, bool write_combined,
         std::optional<int> device) {
        int const dev = device_or_current(device);
        host_alloc_flags flags;
        flags.mapped = mapped;
        flags.portable = portable;
        flags.write_combined = write_combined;
        context_use use;
        return host_allocation{get_context(dev).memory_manager().memhostalloc(bytes, flags), dev};
      },
      "bytes"_a, "mapped"_a = false, "portable"_a = false, "write_combined"_a = false,
      "device"_a = nb::none());
  m.def(
      "release_stream",
      [](std::uintptr_t stream, std::optional<int> device) {
        context_use use;
        manager_of(device).release_stream(to_stream(stream));
      },
      "stream"_a, "device"_a = nb::none());
  m.def(
      "get_ipc_handle",
      [](allocation const& a) {
        ipc_handle const h = [&] {
          context_use use;
          return get_context(a.device).memory_manager().get_ipc_handle(a.memory);
        }();
        auto const& raw = h.handle();
        return std::make_tuple(nb::bytes(reinterpret_cast<char const*>(raw.data()), raw.size()),
                               h.size(), h.offset());
      },
      "allocation"_a);
  // gpumem.ipc: the whole ipc_handle (source process and device included) as bytes, and its
  // opening in another process as an Allocation that owns the mapping.
  m.def(
      "ipc_export",
      [](allocation const& a) {
        std::vector<std::uint8_t> const bytes = [&] {
          context_use use;
          return get_context(a.device).memory_manager().get_ipc_handle(a.memory).serialize();
        }();
        return nb::bytes(reinterpret_cast<char const*>(bytes.data()), bytes.size());
      },
      "allocation"_a);
  m.def(
      "ipc_open",
      [](nb::bytes const& handle, std::optional<int> device) {
        int const dev = device_or_current(device);
        ipc_handle h =
            ipc_handle::deserialize(static_cast<std::uint8_t const*>(handle.data()), handle.size());
        context_use use;
        return allocation{h.open(get_context(dev)), dev};
      },
      "handle"_a, "device"_a = nb::none());
  m.def("backend_kind", [] { return std::string(to_string(backend().kind())); });

  m.def("statistics", &statistics_of, "device"_a = nb::none());
  m.def(
      "memory_info",
      [](std::optional<int> device) {
        context_use use;
        memory_info const i = manager_of(device).get_memory_info();
        return std::make_tuple(i.free, i.total);
      },
      "device"_a = nb::none());
  m.def(
      "defer_cleanup",
      [](std::optional<int> device) {
        context_use use;
        return deferral{manager_of(device).defer_cleanup()};
      },
      "device"_a = nb::none());
  m.def(
      "flush",
      [](std::optional<int> device) {
        context_use use;
        return manager_of(device).owning_context().pending_deallocations().flush();
      },
      "device"_a = nb::none(), nb::call_guard<gil_release>());
  m.def(
      "reset",
      [](std::optional<int> device) {
        context_use use;
        manager_of(device).reset();
      },
      "device"_a = nb::none(), nb::call_guard<gil_release>());
  m.def(
      "close",
      [](std::optional<int> device) {
        context_change change;
        if (device)
          gpumem::close(*device);
        else
          gpumem::close();
      },
      "device"_a = nb::none(), nb::call_guard<gil_release>());
  m.def(
      "_time_torch_pair",
      [](std::size_t iters, std::size_t bytes, int device, std::uintptr_t stream) {
        // The C side of the PyTorch bridge alone: nanoseconds per gpumem_torch_alloc + free
        // (bench/python_alloc.py splits torch.empty's cost with it).
        void* const s = reinterpret_cast<void*>(stream);  // NOLINT: handles cross as integers
        auto const start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iters; ++i) {
          void* const p = gpumem_torch_alloc(bytes, device, s);
          gpumem_torch_free(p, bytes, device, s);
        }
        std::chrono::duration<double, std::nano> const took =
            std::chrono::steady_clock::now() - start;
        return iters == 0 ? 0.0 : took.count() / static_cast<double>(iters);
      },
      "iters"_a, "bytes"_a, "device"_a, "stream"_a = 0);
  // For the tests of the PyTorch bridge: its allocation with its C++ errors as Python exceptions
  // (ctypes cannot catch an exception), and its per-device count of table blocks.
  m.def(
      "_torch_alloc",
      [](std::size_t bytes, int device, std::uintptr_t stream) {
        void* const s = reinterpret_cast<void*>(stream);  // NOLINT: handles cross as integers
        return reinterpret_cast<std::uintptr_t>(gpumem_torch_alloc(bytes, device, s));
      },
      "bytes"_a, "device"_a, "stream"_a = 0);
  m.def("_torch_table_blocks", &torch_table_blocks, "device"_a);
  // set_python_error of a std::runtime_error with `what` as its message: for tests.
  m.def(
      "_raise_runtime_error",
      [](nb::bytes const& what) {
        set_python_error(std::make_exception_ptr(
            std::runtime_error(std::string(static_cast<char const*>(what.data()), what.size()))));
        throw nb::python_error();
      },
      "what"_a);
  // Streams of the backend, and the host backend's simulated captures, for tests of the bridges'
  // stream paths (the host backend has no graphs: simulate_stream_capture).
  m.def(
      "_stream_create",
      [](bool non_blocking) {
        return reinterpret_cast<std::uintptr_t>(backend().create_stream(non_blocking));
      },
      "non_blocking"_a = true);
  m.def(
      "_stream_destroy", [](std::uintptr_t stream) { backend().destroy_stream(to_stream(stream)); },
      "stream"_a);
  m.def(
      "_simulate_stream_capture",
      [](std::uintptr_t stream, bool capturing) {
        simulate_stream_capture(backend(), to_stream(stream), capturing);
      },
      "stream"_a, "capturing"_a);
  // Holds a stream busy: work queued after this waits until the returned callable is called (it
  // opens the hold; calling it again does nothing). For tests of paths that see busy streams.
  m.def(
      "_stream_hold",
      [](std::uintptr_t stream) {
        auto open = std::make_shared<std::atomic<bool>>(false);
        backend().enqueue_host_function(to_stream(stream), [open] {
          while (!open->load(std::memory_order_acquire))
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
        return nb::cpp_function([open] { open->store(true, std::memory_order_release); });
      },
      "stream"_a);
  m.def(
      "_stream_is_capturing",
      [](std::uintptr_t stream) { return backend().stream_is_capturing(to_stream(stream)); },
      "stream"_a);
  m.def(
      "_time_device_synchronize",
      [](std::size_t iters, int device) {
        // What the deferred queue's release barrier costs (one per release of retired EMM frees):
        // nanoseconds per device synchronisation (bench/python_alloc.py).
        auto const start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iters; ++i) {
          detail::scoped_device on_device(device);
          backend().synchronize();
        }
        std::chrono::duration<double, std::nano> const took =
            std::chrono::steady_clock::now() - start;
        return iters == 0 ? 0.0 : took.count() / static_cast<double>(iters);
      },
      "iters"_a, "device"_a);
  m.def(
      "close_for_device_reset",
      [](int device) {
        context_change change;
        gpumem::close_for_device_reset(device);
      },
      "device"_a, nb::call_guard<gil_release>(),
      "close(device) before the device's CUDA context is reset (Numba's cuda.close()): memory "
      "still live is left to the reset; its later frees make no device call.");
}
