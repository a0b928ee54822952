// gpumem/array/host_span.hpp
//
// A non-owning view of `size` contiguous host elements (std::span is C++20). Transfers read or
// write a host_span as a dense array in the device array's natural order (array_layout.hpp).
// The memory must stay valid until the transfer has completed (for an asynchronous one: until
// its stream has passed it).
#pragma once

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace gpumem {

template <class T>
class host_span {
 public:
  host_span() = default;
  // `size` elements at `data`; a size whose bytes would pass max_allocation_bytes describes no
  // memory that can exist (gpumem::logic_error naming it), so size_bytes() never wraps. A null
  // `data` with a size is a logic_error too (as for buffers): a transfer would copy from address 0.
  host_span(T* data, std::size_t size) : data_(data), size_(size) {
    GPUMEM_EXPECTS(size <= max_allocation_bytes / sizeof(T),
                   "host_span: " + std::to_string(size) + " elements of " +
                       std::to_string(sizeof(T)) + " bytes exceed the address space");
    GPUMEM_EXPECTS(data != nullptr || size == 0,
                   "host_span: null pointer for " + std::to_string(size) + " elements");
  }
  template <class A, class U = std::remove_const_t<T>>
  host_span(std::vector<U, A>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit
  template <class A, class U = std::remove_const_t<T>,
            class = std::enable_if_t<std::is_const_v<T>, A>>
  host_span(std::vector<U, A> const& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit
  template <std::size_t N, class U = std::remove_const_t<T>>
  host_span(std::array<U, N>& a) : data_(a.data()), size_(N) {}  // NOLINT: implicit
  template <std::size_t N, class U = std::remove_const_t<T>,
            class = std::enable_if_t<std::is_const_v<T>, U>>
  host_span(std::array<U, N> const& a) : data_(a.data()), size_(N) {}  // NOLINT: implicit
  // A span of T converts to a span of const T.
  template <class U, class = std::enable_if_t<std::is_same_v<T const, U const> &&
                                              std::is_const_v<T> && !std::is_const_v<U>>>
  host_span(host_span<U> other) : data_(other.data()), size_(other.size()) {}  // NOLINT

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gpumem
