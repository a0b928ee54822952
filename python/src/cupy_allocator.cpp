// gpumem.cupy's allocator in C (_cupy_malloc): stream-ordered on CuPy's current stream and device,
// with CuPy's pointer types made here, so that no Python runs per allocation (docs/python.md).
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "module.hpp"

namespace gpumem::python {
namespace {

using namespace nb::literals;

// What gpumem.cupy hands over once (_cupy_setup): CuPy's current-stream function (a cdef
// function exported through cupy_backends.cuda.stream's __pyx_capi__ capsules), CuPy's two
// pointer types, and two Python callbacks for the rare paths. Guarded by the GIL.
struct cupy_bridge {
  std::intptr_t (*current_stream)() = nullptr;  // null: call current_stream_fallback
  nb::object current_stream_fallback;           // () -> the current stream's handle
  nb::object unowned_memory;                    // cupy.cuda.memory.UnownedMemory
  nb::object memory_pointer;                    // cupy.cuda.memory.MemoryPointer
  nb::object keep_stream;                       // (device, handle): keeps CuPy's stream object
  nb::object out_of_memory;                     // (nbytes): gc, retry, CuPy's OutOfMemoryError
  std::vector<std::pair<int, std::uintptr_t>> known_streams;  // told to keep_stream
};

cupy_bridge& cupy() {
  static auto* const bridge = new cupy_bridge();  // never destroyed: objects die with Python
  return *bridge;
}

void cupy_setup(nb::handle capsule, nb::object fallback, nb::object unowned_memory,
                nb::object memory_pointer, nb::object keep_stream, nb::object out_of_memory) {
  cupy_bridge& b = cupy();
  b.current_stream = nullptr;
  // The signature Cython writes into the capsule's name: use it only where it is exactly this.
  char const* const signature = "intptr_t (void)";
  if (capsule.is_valid() && !capsule.is_none() && PyCapsule_IsValid(capsule.ptr(), signature))
    b.current_stream =
        reinterpret_cast<std::intptr_t (*)()>(PyCapsule_GetPointer(capsule.ptr(), signature));
  b.current_stream_fallback = std::move(fallback);
  b.unowned_memory = std::move(unowned_memory);
  b.memory_pointer = std::move(memory_pointer);
  b.keep_stream = std::move(keep_stream);
  b.out_of_memory = std::move(out_of_memory);
}

std::uintptr_t cupy_current_stream(cupy_bridge& b) {
  if (b.current_stream != nullptr) {
    std::intptr_t const handle = b.current_stream();
    if (PyErr_Occurred() != nullptr) throw nb::python_error();  // it may raise (no device)
    return static_cast<std::uintptr_t>(handle);
  }
  return nb::cast<std::uintptr_t>(b.current_stream_fallback());
}

// The owner CuPy's UnownedMemory keeps: a capsule whose destructor frees. Cheaper to make than
// an Allocation (no nanobind instance, which nanobind also registers in its own table); CuPy never
// looks into it.
char const* const owner_capsule_name = "gpumem.memory";

void free_owner_capsule(PyObject* capsule) noexcept {
  delete static_cast<memory_pointer*>(PyCapsule_GetPointer(capsule, owner_capsule_name));
}

nb::object owner_capsule(memory_pointer memory) {
  if (!memory) return nb::none();  // 0 bytes: nothing to own
  auto* held = new memory_pointer(std::move(memory));
  PyObject* const capsule = PyCapsule_New(held, owner_capsule_name, &free_owner_capsule);
  if (capsule == nullptr) {
    delete held;
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

nb::object cupy_malloc(std::size_t nbytes) {
  cupy_bridge& b = cupy();
  GPUMEM_EXPECTS(b.memory_pointer.is_valid(), "gpumem.cupy: _cupy_setup was not called");
  int const device = backend().current_device();
  std::uintptr_t const stream = cupy_current_stream(b);
  if (stream > 2) {  // 0 null, 1 legacy, 2 per-thread: never destroyed
    std::pair<int, std::uintptr_t> const key(device, stream);
    auto& known = b.known_streams;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      b.keep_stream(device, stream);
      known.push_back(key);
    }
  }
  memory_pointer memory;
  try {
    memory = get_context(device).memory_manager().allocate(nbytes, to_stream(stream));
  } catch (out_of_memory const&) {
    return b.out_of_memory(nbytes);  // Python: gc.collect(), one retry, CuPy's error
  }
  std::uintptr_t const ptr = reinterpret_cast<std::uintptr_t>(memory.device_pointer());
  nb::object owner = owner_capsule(std::move(memory));
  return b.memory_pointer(b.unowned_memory(ptr, nbytes, owner, device), 0);
}

void cupy_forget_stream(int device, std::uintptr_t stream) {
  auto& known = cupy().known_streams;
  known.erase(std::remove(known.begin(), known.end(), std::make_pair(device, stream)), known.end());
}

}  // namespace

void add_cupy_allocator(nb::module_& m) {
  m.def("_cupy_setup", &cupy_setup, "current_stream"_a.none(), "current_stream_fallback"_a,
        "unowned_memory"_a, "memory_pointer"_a, "keep_stream"_a, "out_of_memory"_a);
  m.def("_cupy_malloc", &cupy_malloc, "nbytes"_a,
        "gpumem.cupy.malloc: stream-ordered on CuPy's current stream and device.");
  m.def("_cupy_forget_stream", &cupy_forget_stream, "device"_a, "stream"_a);
}

}  // namespace gpumem::python
