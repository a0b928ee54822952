// gpumem.numba's memalloc in C. After initialize() the plugin's `memalloc` is a function of the
// extension (_numba_memalloc's result, an instance attribute that shadows the method), so that
// Numba's ctx.memalloc(n) runs no Python frame of gpumem's: one call that allocates from the
// device's manager and makes the MemoryPointer subclass instance Numba gets.
//
// Per allocation it makes two Python objects:
//   * the pointer: an instance of gpumem.numba._GpumemPointer made by its type's tp_new (no
//     __init__), with `context`, `size` and `_allocation` set in C (the size object is the
//     caller's own int, so no int is made; the class reads `_cuda_memsize_` from `size`);
//   * its `_allocation`: a BlockAllocation (block_allocation.hpp), a plain C object that owns the
//     memory. With the pool and async managers it holds an unowned block
//     (memory_manager::memalloc_unowned: no owner record on the C++ side either) and its
//     destructor queues the free on the context's deferred queue (the EMM rule); with other
//     managers it holds the memory_pointer memalloc returned.
// Out of memory (after the manager's own flush and retry): the `out_of_memory` callback given to
// _numba_memalloc answers (gpumem.numba's collection, retry and Numba's error), else
// gpumem.OutOfMemoryError. Everything runs with the GIL held, as Numba calls it.
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <nanobind/stl/string.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "block_allocation.hpp"
#include "module.hpp"

namespace gpumem::python {
namespace {

using namespace nb::literals;

PyObject* no_instances(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError, "made by the extension only (gpumem.numba's memalloc)");
  return nullptr;
}

// --- the memalloc function: NumbaMemalloc (its state) and a METH_O function over it ---

struct numba_memalloc {
  PyObject ob_base;         // PyObject_HEAD
  PyObject* cls;            // gpumem.numba._GpumemPointer (a new reference)
  PyObject* context;        // what the pointers' `context` is (Numba's context, a weak proxy)
  PyObject* out_of_memory;  // (size) -> answer, or null: gpumem.OutOfMemoryError
  newfunc make;             // cls's tp_new
  int device;
};

int memalloc_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* const s = reinterpret_cast<numba_memalloc*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(s->cls);
  Py_VISIT(s->context);
  Py_VISIT(s->out_of_memory);
  return 0;
}

int memalloc_clear(PyObject* self) {
  auto* const s = reinterpret_cast<numba_memalloc*>(self);
  Py_CLEAR(s->cls);
  Py_CLEAR(s->context);
  Py_CLEAR(s->out_of_memory);
  return 0;
}

void memalloc_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  memalloc_clear(self);
  PyTypeObject* const type = Py_TYPE(self);
  reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free))(self);
  Py_DECREF(type);
}

PyType_Slot memalloc_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&memalloc_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&memalloc_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&memalloc_clear)},
    {Py_tp_new, reinterpret_cast<void*>(&no_instances)},
    {Py_tp_doc, const_cast<char*>("The state of a gpumem.numba memalloc function.")},
    {0, nullptr}};

PyType_Spec memalloc_spec = {"gpumem._gpumem.NumbaMemalloc",
                             static_cast<int>(sizeof(numba_memalloc)), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, memalloc_slots};

PyTypeObject* memalloc_type = nullptr;

// Attribute names, interned once (references kept for the process).
struct pointer_names {
  PyObject* context = PyUnicode_InternFromString("context");
  PyObject* size = PyUnicode_InternFromString("size");
  PyObject* allocation = PyUnicode_InternFromString("_allocation");
  PyObject* no_args = PyTuple_New(0);
};

pointer_names const& names() {
  static pointer_names const* const made = new pointer_names();
  return *made;
}

// A bad size: gpumem.InvalidArgumentError (a ValueError) naming it.
PyObject* bad_size(PyObject* size) noexcept {
  PyErr_Clear();
  std::string shown = "?";
  if (PyObject* const r = PyObject_Repr(size)) {
    if (char const* const text = PyUnicode_AsUTF8AndSize(r, nullptr)) shown = text;
    Py_DECREF(r);
  }
  PyErr_Clear();
  set_python_error(std::make_exception_ptr(logic_error(
      "gpumem.numba: memalloc needs a size in bytes (an int of 0 or more), not " + shown)));
  return nullptr;
}

// memalloc(size): the pointer (a new reference), or null with the Python error set.
PyObject* memalloc_call(PyObject* self, PyObject* size) noexcept {
  auto* const s = reinterpret_cast<numba_memalloc*>(self);
  nb::object index;  // a size given as another integral type, as an int
  if (!PyLong_CheckExact(size)) {
    index = nb::steal(PyNumber_Index(size));
    if (!index.is_valid()) return bad_size(size);
    size = index.ptr();
  }
  std::size_t const bytes = PyLong_AsSize_t(size);
  if (bytes == static_cast<std::size_t>(-1) && PyErr_Occurred() != nullptr) return bad_size(size);
  std::exception_ptr ran_out;
  PyObject* const allocation = new_block_allocation(s->device, bytes, std::nullopt, ran_out);
  if (allocation == nullptr) {
    if (!ran_out) return nullptr;
    if (s->out_of_memory != nullptr)
      return PyObject_CallFunctionObjArgs(s->out_of_memory, size, nullptr);
    set_python_error(ran_out);  // gpumem.OutOfMemoryError
    return nullptr;
  }
  pointer_names const& n = names();
  PyObject* const pointer =
      s->make(reinterpret_cast<PyTypeObject*>(s->cls), n.no_args, nullptr);  // no __init__
  if (pointer == nullptr || PyObject_SetAttr(pointer, n.context, s->context) != 0 ||
      PyObject_SetAttr(pointer, n.size, size) != 0 ||
      PyObject_SetAttr(pointer, n.allocation, allocation) != 0) {
    Py_XDECREF(pointer);
    Py_DECREF(allocation);  // frees the memory (deferred)
    return nullptr;
  }
  Py_DECREF(allocation);  // the pointer holds it
  return pointer;
}

PyMethodDef memalloc_def = {"memalloc", &memalloc_call, METH_O,
                            "memalloc(size): a gpumem.numba pointer owning `size` bytes of the "
                            "device's memory (gpumem.numba's EMM memalloc)."};

// _numba_memalloc(cls, context, device, out_of_memory): the memalloc function.
nb::object make_memalloc(nb::handle cls, nb::handle context, int device, nb::handle out_of_memory) {
  GPUMEM_EXPECTS(PyType_Check(cls.ptr()), "_numba_memalloc: cls is not a type");
  auto const make = reinterpret_cast<newfunc>(
      PyType_GetSlot(reinterpret_cast<PyTypeObject*>(cls.ptr()), Py_tp_new));
  GPUMEM_EXPECTS(make != nullptr, "_numba_memalloc: cls cannot be instantiated");
  {
    context_use use;
    (void)get_context(device);  // a device that does not exist is an error now, not per call
  }
  (void)names();
  nb::object state = nb::steal(PyType_GenericAlloc(memalloc_type, 0));  // zeroed; tracked
  if (!state.is_valid()) throw nb::python_error();
  auto* const s = reinterpret_cast<numba_memalloc*>(state.ptr());
  s->cls = nb::borrow(cls).release().ptr();
  s->context = nb::borrow(context).release().ptr();
  if (out_of_memory.is_valid() && !out_of_memory.is_none())
    s->out_of_memory = nb::borrow(out_of_memory).release().ptr();
  s->make = make;
  s->device = device;
  nb::object function = nb::steal(PyCFunction_NewEx(&memalloc_def, state.ptr(), nullptr));
  if (!function.is_valid()) throw nb::python_error();
  return function;
}

// _time_numba_pair: nanoseconds per memalloc + free of the device's manager as the function above
// makes them, without Python (bench/python_alloc.py splits the pointer's cost with it).
double time_numba_pair(std::size_t iters, std::size_t bytes, int device) {
  context_use use;
  memory_manager& manager = get_context(device).memory_manager();
  unowned_blocks* const blocks = manager.unowned();
  auto const start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < iters; ++i) {
    if (blocks != nullptr)
      blocks->deallocate_deferred(manager.memalloc_unowned(bytes), bytes);
    else
      memory_pointer doomed = manager.memalloc(bytes);
  }
  std::chrono::duration<double, std::nano> const took = std::chrono::steady_clock::now() - start;
  return iters == 0 ? 0.0 : took.count() / static_cast<double>(iters);
}

PyTypeObject* make_type(PyType_Spec& spec) {
  PyObject* const type = PyType_FromSpec(&spec);
  if (type == nullptr) throw nb::python_error();
  return reinterpret_cast<PyTypeObject*>(type);  // kept for the process
}

}  // namespace

void add_numba_pointer(nb::module_& m) {
  memalloc_type = make_type(memalloc_spec);
  m.def("_numba_memalloc", &make_memalloc, "cls"_a, "context"_a, "device"_a,
        "out_of_memory"_a.none(),
        "gpumem.numba's memalloc: a function of one argument, the size, returning a `cls` "
        "instance (made without __init__) whose `_allocation` owns memalloc(size) of `device`.");
  m.def("_time_numba_pair", &time_numba_pair, "iters"_a, "bytes"_a, "device"_a);
}

}  // namespace gpumem::python
