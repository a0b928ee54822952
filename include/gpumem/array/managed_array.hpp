// gpumem/array/managed_array.hpp
//
// managed_array<T>: an N-dimensional array in managed (unified) memory (Numba's managed_array),
// allocated through the current context's memory manager (memallocmanaged). One address is
// valid on the host (operator(), host_view()) and in kernels (view()); the driver migrates pages.
// `attach::global` (cudaMemAttachGlobal) makes it accessible from any stream; `attach::host`
// (cudaMemAttachHost) only from the host until attached to a stream. After device work the host
// must synchronise before touching it (devices without concurrent managed access fault
// otherwise).
//
// Zero-size arrays allocate nothing. Ownership: copies and views share one memory_pointer.
// Thread safety: as shared_ptr; the elements are not synchronised.
#pragma once

#include <gpumem/array/detail/host_array_base.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>

namespace gpumem {

namespace detail {
memory_pointer allocate_managed_memory(std::size_t bytes, bool attach_global);
}  // namespace detail

enum class attach { global, host };

template <class T>
class managed_array : public detail::host_array_base<managed_array<T>, T, memory_pointer> {
  using base = detail::host_array_base<managed_array<T>, T, memory_pointer>;
  friend detail::array_base<managed_array<T>, T, memory_pointer>;

 public:
  managed_array() = default;
  explicit managed_array(shape_type const& shape, array_order order = array_order::c,
                         attach where = attach::global)
      : base(detail::allocate_managed_memory(array_layout::contiguous(shape, sizeof(T)).nbytes(),
                                             where == attach::global),
             nullptr, array_layout::contiguous(shape, sizeof(T), order)) {
    this->data_ = static_cast<T*>(this->owner_.device_pointer());
  }

  // The view a kernel takes by value (the same address as the host's).
  array_view<T> view() const { return {this->data_, this->layout_}; }
};

}  // namespace gpumem
