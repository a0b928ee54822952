// gpumem/manager/ipc_mixin.hpp
//
// The default get_ipc_handle (the spec's GetIpcHandleMixin): the base of the allocation that
// contains the pointer comes from backend().get_address_range() (cuMemGetAddressRange), the
// handle from backend().ipc_get_handle(base) (cudaIpcGetMemHandle), and the handle records the
// pointer's offset from that base — so views and sub-allocations of a pool that carves blocks out
// of cudaMalloc'd slabs export correctly.
//
// Usage: `class my_manager : public ipc_mixin<host_only_memory_manager> { ... };`
// Valid for memory from cudaMalloc (or a pool over it). NOT valid for cudaMallocAsync pools
// (those need exportable pools) or managed memory; such managers implement get_ipc_handle
// themselves.
//
// Thread safety: stateless; as the backend calls it makes.
#pragma once

#include <gpumem/manager/ipc_handle.hpp>
#include <gpumem/manager/memory_manager.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <type_traits>

namespace gpumem {

// The handle of `memory` as described above; the handle keeps `memory` alive. Throws
// gpumem::logic_error for an empty pointer or one that holds no memory (memalloc(0)); cuda_error
// when the backend cannot export it.
ipc_handle make_ipc_handle(memory_pointer const& memory);

template <class Base>
class ipc_mixin : public Base {
  static_assert(std::is_base_of_v<memory_manager, Base>, "ipc_mixin extends a memory_manager");

 public:
  using Base::Base;
  ipc_handle get_ipc_handle(memory_pointer const& memory) override {
    return make_ipc_handle(memory);
  }
};

}  // namespace gpumem
