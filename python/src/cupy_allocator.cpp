// gpumem.cupy's allocator in C (_cupy_malloc): stream-ordered on CuPy's current stream and device,
// with CuPy's pointer objects made here, so that no Python runs per allocation (docs/python.md).
//
// Per allocation it makes three objects: the owner of the block (a BlockAllocation, freed on its
// stream when CuPy drops the memory), CuPy's UnownedMemory around it and the MemoryPointer CuPy
// gets. CuPy's two are Cython types whose __init__ only stores its arguments; calling a type costs
// an argument tuple, two ints and the argument parsing, a few hundred nanoseconds, so where it
// can, the allocator makes them as CuPy's own Cython code would: the type's tp_new (which sets
// the object's internals, every field None or 0) and the stores __init__ makes, at offsets found
// once at _cupy_setup. Found how: an instance made by calling the type with distinctive values is
// searched for each value (each must be found exactly once), and the fast path is used only where
// an instance it makes from the same values is byte for byte the called one. Anything else (another
// CuPy whose __init__ does more, a build with other field types, the host tests' stand-ins) keeps
// the call. _cupy_fast_path() says which is in use.
//
// Streams: the bridge keeps CuPy's object of every stream it allocated on (known_streams), so that
// CuPy cannot destroy a stream the pool still keeps memory for, and gives a stream back to the pool
// (release_stream) once the program has dropped it and no block of it lives: then the registry
// holds the object's only reference. It looks for such streams whenever a new stream comes and the
// registry has reached twice its size after the last look (at least sweep_minimum entries), so a
// program that makes and drops streams keeps a registry of about the streams it still uses.
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "block_allocation.hpp"
#include "module.hpp"

namespace gpumem::python {
namespace {

using namespace nb::literals;

// Where __init__ stores its arguments in CuPy's objects (byte offsets), and the types' tp_new.
struct cupy_layout {
  bool valid = false;
  newfunc new_memory = nullptr;   // UnownedMemory's tp_new
  Py_ssize_t memory_ptr = 0;      // intptr_t ptr
  Py_ssize_t memory_size = 0;     // size_t size
  Py_ssize_t memory_device = 0;   // int device_id
  Py_ssize_t memory_owner = 0;    // object _owner
  newfunc new_pointer = nullptr;  // MemoryPointer's tp_new
  Py_ssize_t pointer_ptr = 0;     // intptr_t ptr (mem.ptr + offset)
  Py_ssize_t pointer_device = 0;  // int device_id
  Py_ssize_t pointer_mem = 0;     // object mem
};

// What gpumem.cupy hands over once (_cupy_setup): CuPy's current-stream function (a cdef
// function exported through cupy_backends.cuda.stream's __pyx_capi__ capsules), CuPy's two
// pointer types, and two Python callbacks for the rare paths. Guarded by the GIL.
struct cupy_bridge {
  std::intptr_t (*current_stream)() = nullptr;  // null: call current_stream_fallback
  nb::object current_stream_fallback;           // () -> the current stream's handle
  nb::object unowned_memory;                    // cupy.cuda.memory.UnownedMemory
  nb::object memory_pointer;                    // cupy.cuda.memory.MemoryPointer
  nb::object keep_stream;    // (device, handle) -> CuPy's stream object, which it keeps
  nb::object out_of_memory;  // (nbytes): gc, retry, CuPy's OutOfMemoryError
  struct known_stream {      // told to keep_stream
    int device;
    std::uintptr_t handle;
    nb::object stream;  // CuPy's object, kept until release_stream or sweep_streams
  };
  std::vector<known_stream> known_streams;
  std::size_t sweep_at = 0;  // known_streams' size at which a new stream sweeps it first
  cupy_layout layout;
  nb::object no_args;  // () for tp_new
};

cupy_bridge& cupy() {
  static auto* const bridge = new cupy_bridge();  // never destroyed: objects die with Python
  return *bridge;
}

// --- the fast path's layout ---

template <class T>
T load(PyObject* object, Py_ssize_t offset) noexcept {
  T value;
  std::memcpy(&value, reinterpret_cast<char const*>(object) + offset, sizeof value);
  return value;
}

template <class T>
void store(PyObject* object, Py_ssize_t offset, T value) noexcept {
  std::memcpy(reinterpret_cast<char*>(object) + offset, &value, sizeof value);
}

// Puts `value` (a reference the caller gives up) in an object field, releasing the one there.
void store_object(PyObject* object, Py_ssize_t offset, PyObject* value) noexcept {
  PyObject* const old = load<PyObject*>(object, offset);
  store(object, offset, value);
  Py_XDECREF(old);
}

// An instance's size in bytes without its variable part (__basicsize__: the extension is built
// for the stable ABI, where PyTypeObject's fields are not visible), or 0.
Py_ssize_t basic_size(nb::handle type) noexcept {
  try {
    return nb::cast<Py_ssize_t>(type.attr("__basicsize__"));
  } catch (...) {
    PyErr_Clear();
    return 0;
  }
}

// The one offset past the object header at which `object` (of `size` bytes) holds `value`
// (aligned for T), or -1 where none or several do.
template <class T>
Py_ssize_t find_field(PyObject* object, Py_ssize_t size, T value) noexcept {
  Py_ssize_t found = -1;
  Py_ssize_t const end = size - static_cast<Py_ssize_t>(sizeof(T));
  for (Py_ssize_t at = sizeof(PyObject); at <= end; at += alignof(T))
    if (load<T>(object, at) == value) {
      if (found >= 0) return -1;
      found = at;
    }
  return found;
}

bool same_fields(PyObject* a, PyObject* b, Py_ssize_t size) noexcept {
  return Py_TYPE(a) == Py_TYPE(b) && size > static_cast<Py_ssize_t>(sizeof(PyObject)) &&
         std::memcmp(reinterpret_cast<char const*>(a) + sizeof(PyObject),
                     reinterpret_cast<char const*>(b) + sizeof(PyObject),
                     static_cast<std::size_t>(size) - sizeof(PyObject)) == 0;
}

// The type's tp_new, or null (Python before 3.10 cannot read a slot of a static type).
newfunc new_of(nb::handle type) noexcept {
  if (!PyType_Check(type.ptr())) return nullptr;
  auto const made = reinterpret_cast<newfunc>(
      PyType_GetSlot(reinterpret_cast<PyTypeObject*>(type.ptr()), Py_tp_new));
  if (made == nullptr) PyErr_Clear();
  return made;
}

// An instance of `type` made by its tp_new alone (every field None or 0), or null with the Python
// error set; `held`, a reference the caller gives up to the instance, is released then.
PyObject* new_instance(newfunc make, nb::object const& type, cupy_bridge const& b,
                       PyObject* held) noexcept {
  PyObject* const made =
      make(reinterpret_cast<PyTypeObject*>(type.ptr()), b.no_args.ptr(), nullptr);
  if (made == nullptr) Py_DECREF(held);
  return made;
}

// UnownedMemory(ptr, size, owner, device) made without calling the type (the layout is valid).
// Takes `owner`'s reference. Null with the Python error set.
PyObject* fast_memory(cupy_bridge const& b, std::intptr_t ptr, std::size_t size, PyObject* owner,
                      int device) noexcept {
  cupy_layout const& l = b.layout;
  PyObject* const memory = new_instance(l.new_memory, b.unowned_memory, b, owner);
  if (memory == nullptr) return nullptr;
  store(memory, l.memory_ptr, ptr);
  store(memory, l.memory_size, size);
  store(memory, l.memory_device, device);
  store_object(memory, l.memory_owner, owner);
  return memory;
}

// MemoryPointer(memory, 0) made without calling the type. Takes `memory`'s reference.
PyObject* fast_pointer(cupy_bridge const& b, PyObject* memory, std::intptr_t ptr,
                       int device) noexcept {
  cupy_layout const& l = b.layout;
  PyObject* const pointer = new_instance(l.new_pointer, b.memory_pointer, b, memory);
  if (pointer == nullptr) return nullptr;
  store(pointer, l.pointer_ptr, ptr);
  store(pointer, l.pointer_device, device);
  store_object(pointer, l.pointer_mem, memory);
  return pointer;
}

// Finds the layout (see the file's comment); invalid where anything does not match.
cupy_layout find_layout(cupy_bridge& b) {
  cupy_layout l;
  l.new_memory = new_of(b.unowned_memory);
  l.new_pointer = new_of(b.memory_pointer);
  Py_ssize_t const memory_size = basic_size(b.unowned_memory);
  Py_ssize_t const pointer_size = basic_size(b.memory_pointer);
  if (l.new_memory == nullptr || l.new_pointer == nullptr || memory_size == 0 || pointer_size == 0)
    return l;
  // Values that cannot be mistaken for each other or for a pointer's halves.
  std::intptr_t const ptr = 0x7a5a12345670;
  std::size_t const size = 0x3c3c11112220;
  int const device = 0x1357;
  std::intptr_t const offset = 0x40;
  nb::object const owner = nb::steal(PyList_New(0));  // any object: its address is searched
  nb::object called;
  nb::object called_pointer;
  try {
    called = b.unowned_memory(ptr, size, owner, device);
    called_pointer = b.memory_pointer(called, offset);
  } catch (nb::python_error const&) {
    return l;  // not CuPy's signatures: the calls stay
  }
  if (Py_TYPE(called.ptr()) != reinterpret_cast<PyTypeObject*>(b.unowned_memory.ptr()) ||
      Py_TYPE(called_pointer.ptr()) != reinterpret_cast<PyTypeObject*>(b.memory_pointer.ptr()))
    return l;
  l.memory_ptr = find_field<std::intptr_t>(called.ptr(), memory_size, ptr);
  l.memory_size = find_field<std::size_t>(called.ptr(), memory_size, size);
  l.memory_device = find_field<int>(called.ptr(), memory_size, device);
  l.memory_owner = find_field<PyObject*>(called.ptr(), memory_size, owner.ptr());
  l.pointer_ptr = find_field<std::intptr_t>(called_pointer.ptr(), pointer_size, ptr + offset);
  l.pointer_device = find_field<int>(called_pointer.ptr(), pointer_size, device);
  l.pointer_mem = find_field<PyObject*>(called_pointer.ptr(), pointer_size, called.ptr());
  for (Py_ssize_t at : {l.memory_ptr, l.memory_size, l.memory_device, l.memory_owner, l.pointer_ptr,
                        l.pointer_device, l.pointer_mem})
    if (at < 0) return l;
  // The check: the fast path's objects are the called ones, field for field.
  l.valid = true;
  b.layout = l;
  PyObject* const memory = fast_memory(b, ptr, size, nb::borrow(owner).release().ptr(), device);
  bool same = memory != nullptr && same_fields(memory, called.ptr(), memory_size);
  PyObject* const pointer =
      memory == nullptr ? nullptr
                        : fast_pointer(b, nb::borrow(called).release().ptr(), ptr + offset, device);
  same = same && pointer != nullptr && same_fields(pointer, called_pointer.ptr(), pointer_size);
  Py_XDECREF(pointer);
  Py_XDECREF(memory);
  PyErr_Clear();
  l.valid = same;
  return l;
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
  if (!b.no_args.is_valid()) b.no_args = nb::steal(PyTuple_New(0));
  b.layout = {};
  b.layout = find_layout(b);
}

std::uintptr_t cupy_current_stream(cupy_bridge& b) {
  if (b.current_stream != nullptr) {
    std::intptr_t const handle = b.current_stream();
    if (PyErr_Occurred() != nullptr) throw nb::python_error();  // it may raise (no device)
    return static_cast<std::uintptr_t>(handle);
  }
  return nb::cast<std::uintptr_t>(b.current_stream_fallback());
}

// --- the stream registry ---

// The registry is swept when a new stream finds it at sweep_at entries: at least this many.
constexpr std::size_t sweep_minimum = 16;

// Whether the registry may give `k` back now: only it holds CuPy's object (the program dropped it,
// and no block of the stream lives: each holds the object until its free), CuPy owns the stream
// (an ExternalStream's may be destroyed by its owner whatever CuPy holds: never touched), and the
// stream has no work left. A busy stream stays: the pool's release waits for the stream under its
// lock, while the stream's pending work (a host function that needs the GIL) may wait for threads
// that wait for that lock; and a sweep would make the new stream's allocation wait for it.
bool sweepable(cupy_bridge::known_stream const& k) {
  if (Py_REFCNT(k.stream.ptr()) != 1) return false;
  // By name (the stable ABI hides tp_name; the host tests' streams are no CuPy type). A type whose
  // name cannot be read is not touched.
  PyObject* const name =
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(k.stream.ptr())), "__name__");
  char const* const text = name != nullptr ? PyUnicode_AsUTF8AndSize(name, nullptr) : nullptr;
  bool const external = text == nullptr || std::strcmp(text, "ExternalStream") == 0;
  Py_XDECREF(name);
  if (text == nullptr) PyErr_Clear();
  if (external) return false;
  try {
    return backend().query_stream(to_stream(k.handle));
  } catch (...) {
    return false;  // a stream CUDA no longer knows (a reset device): kept, never touched again
  }
}

// Gives back every stream sweepable() allows: each is released to its device's manager, if the
// device still has its context (a closed one kept nothing of it; none is created for it), with the
// GIL released, then dropped, so that CuPy destroys it. A stream whose release fails stays in the
// registry (kept alive: destroying it could leave the pool holding memory for a dead stream).
void sweep_streams(cupy_bridge& b) {
  auto& known = b.known_streams;
  std::vector<cupy_bridge::known_stream> dropped;
  std::vector<cupy_bridge::known_stream> still;
  dropped.reserve(known.size());  // so that the moves below cannot fail half way
  still.reserve(known.size());
  for (auto& k : known)
    (sweepable(k) ? dropped : still).push_back(std::move(k));
  known.swap(still);
  std::vector<char> released(dropped.size(), 0);
  {
    gil_release unlocked;  // the releases wait for the streams
    for (std::size_t i = 0; i < dropped.size(); ++i) {
      try {
        context_use use;
        if (context* const ctx = find_context(dropped[i].device))
          ctx->memory_manager().release_stream(to_stream(dropped[i].handle));
        released[i] = 1;
      } catch (std::exception const& e) {
        log(log_level::warn, std::string("gpumem.cupy: a dropped stream stays alive, since "
                                         "releasing it to the pool failed: ") +
                                 e.what());
      } catch (...) {
        log(log_level::warn,
            "gpumem.cupy: a dropped stream stays alive, since releasing it to "
            "the pool failed");
      }
    }
  }
  for (std::size_t i = 0; i < dropped.size(); ++i)
    if (!released[i]) known.push_back(std::move(dropped[i]));
  b.sweep_at = std::max(sweep_minimum, 2 * known.size());
  // `dropped` goes here, with the GIL: CuPy destroys the released streams.
}

// CuPy's object of the (device, stream) the allocation is for, kept in the registry (a stream seen
// for the first time is asked of the module: keep_stream).
nb::object known_stream_object(cupy_bridge& b, int device, std::uintptr_t stream) {
  auto& known = b.known_streams;
  auto const find = [&] {
    return std::find_if(known.begin(), known.end(),
                        [&](auto const& k) { return k.device == device && k.handle == stream; });
  };
  auto it = find();
  if (it != known.end()) return it->stream;
  if (known.size() >= std::max(sweep_minimum, b.sweep_at)) {
    sweep_streams(b);
    it = find();  // another thread may have added it while the GIL was released
    if (it != known.end()) return it->stream;
  }
  nb::object object = b.keep_stream(device, stream);
  known.push_back({device, stream, object});
  return object;
}

// MemoryPointer(UnownedMemory(ptr, bytes, owner, device), 0): a new reference, or null with the
// Python error set. Takes `owner`'s reference.
PyObject* cupy_pointer(cupy_bridge& b, std::intptr_t ptr, std::size_t bytes, PyObject* owner,
                       int device) {
  if (b.layout.valid) {
    PyObject* const memory = fast_memory(b, ptr, bytes, owner, device);
    return memory == nullptr ? nullptr : fast_pointer(b, memory, ptr, device);
  }
  nb::object const held = nb::steal(owner);
  nb::object pointer = b.memory_pointer(b.unowned_memory(ptr, bytes, held, device), 0);
  return pointer.release().ptr();
}

// malloc(nbytes): the MemoryPointer, or null with the Python error set. Out of memory (after the
// manager's own recovery): the bridge's callback answers when `retry_in_python` (gc, one more try,
// CuPy's error), else gpumem.OutOfMemoryError.
PyObject* malloc_for_cupy(PyObject* size, bool retry_in_python) noexcept {
  cupy_bridge& b = cupy();
  try {
    GPUMEM_EXPECTS(b.memory_pointer.is_valid(), "gpumem.cupy: _cupy_setup was not called");
    std::size_t const bytes = PyLong_AsSize_t(size);
    if (bytes == static_cast<std::size_t>(-1) && PyErr_Occurred() != nullptr) return nullptr;
    int const device = backend().current_device();
    std::uintptr_t const stream = cupy_current_stream(b);
    // Every block of a stream other than the null, legacy and per-thread ones (never destroyed)
    // holds CuPy's stream object until its free, so that CuPy destroys the stream only after the
    // frees ordered on it, whatever order the user drops arrays and streams in.
    nb::object stream_object;
    if (stream > 2) stream_object = known_stream_object(b, device, stream);
    std::exception_ptr ran_out;
    PyObject* const owner = new_block_allocation(device, bytes, to_stream(stream), ran_out);
    if (owner == nullptr) {
      if (!ran_out) return nullptr;
      if (retry_in_python) return b.out_of_memory(bytes).release().ptr();
      set_python_error(ran_out);  // gpumem.OutOfMemoryError
      return nullptr;
    }
    if (stream_object.is_valid() && !stream_object.is_none())
      block_allocation_keep(owner, stream_object.ptr());
    auto const ptr =
        static_cast<std::intptr_t>(reinterpret_cast<std::uintptr_t>(block_allocation_ptr(owner)));
    return cupy_pointer(b, ptr, bytes, owner, device);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (...) {
    set_python_error(std::current_exception());
  }
  return nullptr;
}

// _cupy_malloc(nbytes) and _cupy_malloc_no_retry(nbytes), METH_O functions: gpumem.cupy.malloc,
// and the one more try of its out-of-memory path (which raises gpumem.OutOfMemoryError).
PyObject* cupy_malloc(PyObject*, PyObject* size) noexcept {
  return malloc_for_cupy(size, true);
}
PyObject* cupy_malloc_no_retry(PyObject*, PyObject* size) noexcept {
  return malloc_for_cupy(size, false);
}

PyMethodDef cupy_malloc_def = {
    "_cupy_malloc", &cupy_malloc, METH_O,
    "gpumem.cupy.malloc: stream-ordered on CuPy's current stream and device."};
PyMethodDef cupy_malloc_no_retry_def = {
    "_cupy_malloc_no_retry", &cupy_malloc_no_retry, METH_O,
    "gpumem.cupy.malloc's last try after out of memory: raises gpumem.OutOfMemoryError."};

void cupy_forget_stream(int device, std::uintptr_t stream) {
  auto& known = cupy().known_streams;
  known.erase(
      std::remove_if(known.begin(), known.end(),
                     [&](auto const& k) { return k.device == device && k.handle == stream; }),
      known.end());
}

// The registry: [(device, handle, CuPy's stream object)].
nb::list cupy_known_streams() {
  nb::list entries;
  for (auto const& k : cupy().known_streams)
    entries.append(nb::make_tuple(k.device, k.handle, k.stream));
  return entries;
}

}  // namespace

void add_cupy_allocator(nb::module_& m) {
  m.def("_cupy_setup", &cupy_setup, "current_stream"_a.none(), "current_stream_fallback"_a,
        "unowned_memory"_a, "memory_pointer"_a, "keep_stream"_a, "out_of_memory"_a);
  for (PyMethodDef* def : {&cupy_malloc_def, &cupy_malloc_no_retry_def}) {
    nb::object function = nb::steal(PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr()));
    if (!function.is_valid()) throw nb::python_error();
    m.attr(def->ml_name) = function;
  }
  m.def("_cupy_forget_stream", &cupy_forget_stream, "device"_a, "stream"_a);
  m.def("_cupy_known_streams", &cupy_known_streams,
        "The streams gpumem.cupy keeps: [(device, handle, CuPy's stream object)].");
  m.def(
      "_cupy_fast_path", [] { return cupy().layout.valid; },
      "Whether gpumem.cupy makes CuPy's pointer objects without calling their types (see "
      "cupy_allocator.cpp).");
}

}  // namespace gpumem::python
