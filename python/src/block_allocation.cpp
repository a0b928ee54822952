// gpumem._gpumem.BlockAllocation (see block_allocation.hpp).
#include "block_allocation.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <new>
#include <utility>

namespace gpumem::python {

block_memory::~block_memory() {
  if (!blocks || ptr == nullptr) return;  // `memory` frees itself
  if (deferred || thread.freed_by_another_thread())
    blocks->deallocate_deferred(ptr, bytes);
  else
    blocks->deallocate(ptr, bytes, stream);
}

namespace {

struct block_allocation {
  PyObject ob_base;  // PyObject_HEAD
  block_memory memory;
  PyObject* keep;  // released after the free (block_allocation_keep), or null
};

PyTypeObject* type = nullptr;    // made by add_block_allocation, kept for the process
freefunc free_object = nullptr;  // its tp_free

PyObject* no_instances(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError,
                  "made by the extension only (gpumem.numba's memalloc, gpumem.cupy's malloc)");
  return nullptr;
}

void dealloc(PyObject* self) noexcept {
  auto* const allocation = reinterpret_cast<block_allocation*>(self);
  allocation->memory.~block_memory();  // frees
  Py_XDECREF(allocation->keep);
  PyTypeObject* const of = Py_TYPE(self);
  free_object(self);
  Py_DECREF(of);  // instances of heap types hold their type
}

block_memory& memory_of(PyObject* self) {
  return reinterpret_cast<block_allocation*>(self)->memory;
}

PyObject* get_ptr(PyObject* self, void*) {
  return PyLong_FromVoidPtr(memory_of(self).ptr);
}
PyObject* get_size(PyObject* self, void*) {
  return PyLong_FromSize_t(memory_of(self).bytes);
}
PyObject* get_device(PyObject* self, void*) {
  return PyLong_FromLong(memory_of(self).device);
}
PyObject* get_stream(PyObject* self, void*) {
  block_memory const& m = memory_of(self);
  if (m.deferred) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(m.stream);
}

PyGetSetDef members[] = {
    {"ptr", &get_ptr, nullptr, "The device address (0 for 0 bytes).", nullptr},
    {"size", &get_size, nullptr, "The bytes allocated.", nullptr},
    {"device", &get_device, nullptr, "The device ordinal.", nullptr},
    {"stream", &get_stream, nullptr,
     "The stream the block is freed on (a handle), or None for memalloc's memory (freed through "
     "the deferred queue).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

char const doc[] =
    "A block of a device's gpumem memory manager, freed when this object dies: memalloc's memory "
    "through the deferred queue, stream-ordered memory on its stream.";

PyType_Slot slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(&dealloc)},
                       {Py_tp_new, reinterpret_cast<void*>(&no_instances)},
                       {Py_tp_getset, members},
                       {Py_tp_doc, const_cast<char*>(doc)},
                       {0, nullptr}};

PyType_Spec spec = {"gpumem._gpumem.BlockAllocation", static_cast<int>(sizeof(block_allocation)), 0,
                    Py_TPFLAGS_DEFAULT, slots};

}  // namespace

PyObject* new_block_allocation(int device, std::size_t bytes, std::optional<stream_handle> stream,
                               std::exception_ptr& ran_out) noexcept {
  PyObject* const self = PyType_GenericAlloc(type, 0);  // zeroed; refcount 1
  if (self == nullptr) return nullptr;
  block_memory* const m = new (&memory_of(self)) block_memory();
  try {
    context_use use;  // released before the handlers below run Python
    memory_manager& manager = get_context(device).memory_manager();
    m->deferred = !stream.has_value();
    m->stream = stream.value_or(nullptr);
    if (stream) m->thread = per_thread_stream_owner(*stream);
    if (unowned_blocks* const blocks = manager.unowned()) {
      std::shared_ptr<unowned_blocks> keep = blocks->shared_from_this();
      m->ptr = stream ? manager.allocate_unowned(bytes, *stream) : manager.memalloc_unowned(bytes);
      m->blocks = std::move(keep);
    } else {
      m->memory = stream ? manager.allocate(bytes, *stream) : manager.memalloc(bytes);
      m->ptr = m->memory.device_pointer();
    }
    m->bytes = bytes;
    m->device = device;
    return self;
  } catch (gpumem::out_of_memory const&) {
    ran_out = std::current_exception();
  } catch (...) {
    set_python_error(std::current_exception());
  }
  Py_DECREF(self);  // owns nothing
  return nullptr;
}

void* block_allocation_ptr(PyObject* allocation) noexcept {
  return memory_of(allocation).ptr;
}

void block_allocation_keep(PyObject* allocation, PyObject* object) noexcept {
  auto* const a = reinterpret_cast<block_allocation*>(allocation);
  Py_INCREF(object);
  Py_XDECREF(a->keep);
  a->keep = object;
}

void add_block_allocation(nb::module_& m) {
  PyObject* const made = PyType_FromSpec(&spec);
  if (made == nullptr) throw nb::python_error();
  type = reinterpret_cast<PyTypeObject*>(made);  // kept for the process
  free_object = reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free));
  m.attr("BlockAllocation") = nb::borrow(made);
}

}  // namespace gpumem::python
