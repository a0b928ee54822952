// gpumem/array/device_array.hpp
//
// device_array<T>: an N-dimensional array in device memory (Numba's DeviceNDArray), allocated
// through the current context's memory manager (memalloc), so the manager's policy (deferred
// frees, pools, plugins) applies to every array.
//
//   auto d = gpumem::to_device(host_vector);             // host -> device, synchronous
//   gpumem::device_array<float> m({rows, cols});         // uninitialised, C order
//   auto block = m.slice({{0, 2}, {1, 3}});              // a view: shares m's memory
//   launch(cfg, [v = block.view()] GPUMEM_HD (thread_index const& t) { ... });
//   std::vector<float> back = m.copy_to_host();
//
// Zero-size arrays allocate nothing. Arrays over foreign device memory (wrap_device_array) keep
// the foreign owner alive until the last view goes.
//
// Ownership: copies, slices and reshapes share one memory_pointer; the memory returns to the
// manager when the last of them goes. Asynchronous copies keep both sides alive until their
// stream has passed them (stream::keep_alive); kernels using view() do not — keep the array, or
// call stream::keep_alive(array.share_owner()) after the launch.
// Thread safety: as shared_ptr; element access is not synchronised.
// Stream semantics: copies without a stream return when complete; with a stream they are
// asynchronous on it (host buffers must stay valid until the stream has passed the copy).
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/array_view.hpp>
#include <gpumem/array/detail/array_base.hpp>
#include <gpumem/array/detail/transfer.hpp>
#include <gpumem/array/host_span.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace gpumem {

namespace detail {
// memalloc of the current context; nothing for 0 bytes.
memory_pointer allocate_device_memory(std::size_t bytes);
// A memory_pointer over foreign device memory [base, base + bytes) whose owner record keeps
// `owner` alive.
memory_pointer foreign_device_memory(void* base, std::size_t bytes, std::shared_ptr<void> owner);
}  // namespace detail

template <class T>
class device_array : public detail::array_base<device_array<T>, T, memory_pointer> {
  using base = detail::array_base<device_array<T>, T, memory_pointer>;
  friend base;

 public:
  // An empty one-dimensional array of size 0.
  device_array() = default;
  // An uninitialised array of `shape`, contiguous in `order`.
  explicit device_array(shape_type const& shape, array_order order = array_order::c)
      : device_array(allocate_tag{}, array_layout::contiguous(shape, sizeof(T), order)) {}
  // An array over existing device memory: element (0, ..., 0) at byte `byte_offset` of
  // `memory`. Empty `strides`: C-contiguous. Throws logic_error when the elements would reach
  // outside `memory`.
  device_array(memory_pointer memory, shape_type const& shape, strides_type const& strides = {},
               std::size_t byte_offset = 0)
      : base(memory, nullptr,
             strides.empty() ? array_layout::contiguous(shape, sizeof(T))
                             : array_layout::strided(shape, strides, sizeof(T))) {
    detail::check_fits(this->layout_, byte_offset, memory.size(), "device_array");
    this->data_ = this->advance(static_cast<T*>(memory.device_pointer()),
                                static_cast<std::ptrdiff_t>(byte_offset));
  }

  // The non-owning view a kernel takes by value.
  array_view<T> view() const { return {this->data_, this->layout_}; }

  // Host -> device (the host buffer holds size() elements densely, in the natural order).
  void copy_to_device(host_span<T const> src) const { copy_from_host(src, nullptr); }
  void copy_to_device(host_span<T const> src, stream const& s) const { copy_from_host(src, &s); }
  // Device -> device (or from any gpumem array of the same shape and element type; an array of
  // another element type does not compile, as for gpumem::copy: elements of the same size would
  // otherwise be copied as bits, an int32 1 becoming the float 1.4e-45).
  template <class Array, class = typename Array::owner_type,
            class = std::enable_if_t<std::is_same_v<typename Array::value_type, T>>>
  void copy_to_device(Array const& src) const {
    detail::transfer(detail::array_side(*this), detail::array_side(src), nullptr);
  }
  template <class Array, class = typename Array::owner_type,
            class = std::enable_if_t<std::is_same_v<typename Array::value_type, T>>>
  void copy_to_device(Array const& src, stream const& s) const {
    detail::transfer(detail::array_side(*this), detail::array_side(src), &s);
  }
  // Device -> host.
  void copy_to_host(host_span<T> dst) const { copy_into_host(dst, nullptr); }
  void copy_to_host(host_span<T> dst, stream const& s) const { copy_into_host(dst, &s); }
  std::vector<T> copy_to_host() const {
    std::vector<T> out(this->size());
    copy_into_host(host_span<T>(out), nullptr);
    return out;
  }

 private:
  struct allocate_tag {};
  device_array(allocate_tag, array_layout const& layout)
      : base(detail::allocate_device_memory(layout.nbytes()), nullptr, layout) {
    this->data_ = static_cast<T*>(this->owner_.device_pointer());
  }
  void copy_from_host(host_span<T const> src, stream const* s) const {
    detail::transfer(detail::array_side(*this),
                     detail::host_side(src, this->layout_, "copy_to_device"), s);
  }
  void copy_into_host(host_span<T> dst, stream const* s) const {
    detail::transfer(detail::host_side(dst, this->layout_, "copy_to_host"),
                     detail::array_side(*this), s);
  }
};

// A new uninitialised device array with the shape and memory order of `like` (any gpumem array).
template <class Array>
device_array<typename Array::value_type> device_array_like(Array const& like) {
  return device_array<typename Array::value_type>(like.shape(), like.layout().natural_order());
}

// An array over foreign device memory (e.g. from another library), `data` pointing at element
// (0, ..., 0); `owner` (may be empty) stays alive until the last view is gone. Empty `strides`:
// C-contiguous.
template <class T>
device_array<T> wrap_device_array(T* data, shape_type const& shape, strides_type const& strides,
                                  std::shared_ptr<void> owner) {
  array_layout const layout = strides.empty() ? array_layout::contiguous(shape, sizeof(T))
                                              : array_layout::strided(shape, strides, sizeof(T));
  GPUMEM_EXPECTS(reinterpret_cast<std::uintptr_t>(data) % alignof(T) == 0,
                 "wrap_device_array: pointer " +
                     std::to_string(reinterpret_cast<std::uintptr_t>(data)) +
                     " is not aligned to " + std::to_string(alignof(T)) + " bytes");
  GPUMEM_EXPECTS(
      data != nullptr || layout.size() == 0,
      "wrap_device_array: null pointer for a non-empty array (" + layout.describe() + ")");
  auto const e = layout.extent();
  auto* base_ptr = reinterpret_cast<unsigned char*>(data) + e.lowest;
  memory_pointer memory = detail::foreign_device_memory(
      data == nullptr ? nullptr : base_ptr, static_cast<std::size_t>(e.highest - e.lowest),
      std::move(owner));
  return device_array<T>(std::move(memory), shape, layout.strides_vector(),
                         static_cast<std::size_t>(-e.lowest));
}

template <class T>
device_array<T> wrap_device_array(T* data, shape_type const& shape,
                                  std::shared_ptr<void> owner = {}) {
  return wrap_device_array(data, shape, strides_type{}, std::move(owner));
}

}  // namespace gpumem
