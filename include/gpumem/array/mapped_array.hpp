// gpumem/array/mapped_array.hpp
//
// mapped_array<T>: pinned host memory that is also mapped into the device address space
// (Numba's mapped_array): the host reads and writes it through operator() / host_view(), a
// kernel through view(). Nothing is copied; a kernel's writes are visible to the host after the
// kernel's stream has been synchronised.
//
//   gpumem::mapped_array<int> flags({n});
//   launch({grid, block, s.handle()}, [v = flags.view()] GPUMEM_HD (thread_index const& t) {...});
//   s.synchronize();
//   if (flags(0)) ...
//
// data() is the host address. Zero-size arrays allocate nothing. Ownership: copies and views
// share one host_memory (mapped). Thread safety: as shared_ptr; the elements are not synchronised.
#pragma once

#include <gpumem/array/detail/host_array_base.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/manager/host_memory.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem {

template <class T>
class mapped_array : public detail::host_array_base<mapped_array<T>, T, host_memory> {
  using base = detail::host_array_base<mapped_array<T>, T, host_memory>;
  friend detail::array_base<mapped_array<T>, T, host_memory>;

 public:
  mapped_array() = default;
  explicit mapped_array(shape_type const& shape, array_order order = array_order::c,
                        bool portable = false, bool write_combined = false)
      : mapped_array(
            detail::allocate_host_memory(array_layout::contiguous(shape, sizeof(T)).nbytes(),
                                         host_alloc_flags{true, portable, write_combined}),
            array_layout::contiguous(shape, sizeof(T), order)) {}
  // A one-dimensional array over mapped memory from the memory manager (memhostalloc with
  // mapped, or mempin with mapped); throws logic_error when `memory` is not mapped.
  explicit mapped_array(host_memory memory)
      : mapped_array(memory,
                     array_layout::contiguous(shape_type{memory.size() / sizeof(T)}, sizeof(T))) {}

  // The device address of element (0, ..., 0).
  T* device_data() const noexcept {
    return this->data_ == nullptr
               ? nullptr
               : reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(this->data_) +
                                      device_delta_);
  }
  // The view a kernel takes by value (device addresses).
  array_view<T> view() const { return {device_data(), this->layout_}; }

 private:
  mapped_array(host_memory memory, array_layout const& layout)
      : base(std::move(memory), nullptr, layout) {
    if (this->owner_.size() == 0) return;
    GPUMEM_EXPECTS(this->owner_.is_mapped(),
                   "mapped_array: the host memory is pinned but not mapped into the device");
    this->data_ = static_cast<T*>(this->owner_.host_pointer());
    device_delta_ = reinterpret_cast<std::uintptr_t>(this->owner_.device_pointer()) -
                    reinterpret_cast<std::uintptr_t>(this->owner_.host_pointer());
  }

  // device address - host address (modulo 2^64), the same for every element.
  std::uintptr_t device_delta_ = 0;
};

}  // namespace gpumem
