// gpumem/array/pinned_array.hpp
//
// pinned_array<T>: an N-dimensional array in page-locked host memory (Numba's
// pinned_array), allocated through the current context's memory manager (memhostalloc). Copies
// between it and device arrays on a stream are truly asynchronous, which is what pinning is for.
//
//   gpumem::pinned_array<float> staging({n});
//   gpumem::copy(staging, d, s);   // device -> pinned, asynchronous on s
//   s.synchronize();
//   float x = staging(0);
//
// Zero-size arrays allocate nothing. Ownership: copies and views share one host_memory; it is
// freed (through the manager's deferred queue) when the last goes. Thread safety: as shared_ptr.
#pragma once

#include <gpumem/array/detail/host_array_base.hpp>
#include <gpumem/manager/host_memory.hpp>

#include <cstddef>

namespace gpumem {

namespace detail {
// memhostalloc of the current context; nothing for 0 bytes.
host_memory allocate_host_memory(std::size_t bytes, host_alloc_flags flags);
}  // namespace detail

template <class T>
class pinned_array : public detail::host_array_base<pinned_array<T>, T, host_memory> {
  using base = detail::host_array_base<pinned_array<T>, T, host_memory>;
  friend detail::array_base<pinned_array<T>, T, host_memory>;

 public:
  pinned_array() = default;
  // `portable` and `write_combined` as cudaHostAllocPortable / cudaHostAllocWriteCombined.
  explicit pinned_array(shape_type const& shape, array_order order = array_order::c,
                        bool portable = false, bool write_combined = false)
      : base(detail::allocate_host_memory(shape_bytes(shape),
                                          host_alloc_flags{false, portable, write_combined}),
             nullptr, array_layout::contiguous(shape, sizeof(T), order)) {
    this->data_ = static_cast<T*>(this->owner_.host_pointer());
  }

 private:
  static std::size_t shape_bytes(shape_type const& shape) {
    return array_layout::contiguous(shape, sizeof(T)).nbytes();
  }
};

}  // namespace gpumem
