// gpumem/array/detail/array_base.hpp
//
// What every gpumem array shares: an owner of the memory (a memory_pointer or host_memory; copies
// and views of an array share it, so a view keeps its parent's memory alive), a pointer to
// element (0, ..., 0) and a layout. Slicing, selecting, reshaping and splitting derive new arrays
// of the same type over the same owner; nothing is copied.
//
// `data()` is the array's address for copies: device memory for device_array, the host address
// for pinned and mapped arrays, the unified address for managed arrays (under CUDA's unified
// addressing every one of them is a valid cudaMemcpy operand).
//
// Moving an array leaves the source empty, as a default-constructed array (data() null, shape
// (0,), owning nothing): a moved-from handle can never reach memory it no longer keeps alive.
//
// Thread safety: an array is a handle; distinct handles sharing memory may be used and dropped
// from different threads (shared_ptr rules). The elements are not synchronised.
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/array_view.hpp>
#include <gpumem/core/error.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpumem::detail {

template <class Derived, class T, class Owner>
class array_base {
  static_assert(std::is_trivially_copyable_v<T>, "gpumem arrays hold trivially copyable elements");
  static_assert(!std::is_const_v<T>, "use a const array handle instead of a const element type");

 public:
  using value_type = T;
  using owner_type = Owner;
  // The concrete array type (device_array<T>, pinned_array<T>, ...), also from a base's member.
  using array_type = Derived;

  array_layout const& layout() const noexcept { return layout_; }
  int ndim() const noexcept { return layout_.rank; }
  shape_type shape() const { return layout_.shape_vector(); }
  std::size_t shape(int dim) const {
    GPUMEM_EXPECTS(dim >= 0 && dim < layout_.rank, "dimension " + std::to_string(dim) +
                                                       " out of range for rank " +
                                                       std::to_string(layout_.rank));
    return layout_.shape[dim];
  }
  // Strides in bytes (NumPy's convention).
  strides_type strides() const { return layout_.strides_vector(); }
  std::size_t size() const noexcept { return layout_.size(); }
  std::size_t nbytes() const noexcept { return layout_.nbytes(); }
  static constexpr std::size_t itemsize() noexcept { return sizeof(T); }
  bool empty() const noexcept { return size() == 0; }
  bool is_c_contiguous() const noexcept { return layout_.is_c_contiguous(); }
  bool is_f_contiguous() const noexcept { return layout_.is_f_contiguous(); }

  T* data() const noexcept { return data_; }
  Owner const& owner() const noexcept { return owner_; }
  // Handles (this one, copies, views) sharing the memory; 0 for an array that owns nothing.
  long use_count() const noexcept { return owner_.use_count(); }
  // A type-erased share of the owner, for stream::keep_alive(); null when nothing is owned.
  std::shared_ptr<void> share_owner() const {
    if (owner_.use_count() == 0) return nullptr;
    return std::make_shared<Owner>(owner_);
  }

  // The part selected by one slice per leading dimension (see array_layout.hpp).
  Derived slice(std::vector<gpumem::slice> const& slices) const {
    return derive(layout_.sliced(slices));
  }
  // Dimension `dim` fixed at `index`; the result has one dimension less.
  Derived select(int dim, std::size_t index) const { return derive(layout_.selected(dim, index)); }
  // Row `index` of the first dimension (Numba's ary[i] for rank > 1).
  Derived row(std::size_t index) const { return select(0, index); }
  // The same elements with another shape; the array must be contiguous in `order`.
  Derived reshape(shape_type const& shape, array_order order = array_order::c) const {
    return derive({layout_.reshaped(shape, order), 0});
  }
  // A one-dimensional array of the same elements; contiguous arrays only.
  Derived ravel(array_order order = array_order::c) const {
    return reshape(shape_type{size()}, order);
  }
  // Consecutive pieces of `section` rows along the first dimension (the last may be shorter).
  std::vector<Derived> split(std::size_t section) const {
    GPUMEM_EXPECTS(section > 0, "split: section must be positive, got 0");
    GPUMEM_EXPECTS(layout_.rank >= 1, "split: a rank-0 array cannot be split");
    std::vector<Derived> parts;
    std::size_t const n = layout_.shape[0];
    for (std::size_t start = 0; start < n; start += section) {
      std::size_t const stop = n - start < section ? n : start + section;
      parts.push_back(slice({gpumem::slice{static_cast<std::ptrdiff_t>(start),
                                           static_cast<std::ptrdiff_t>(stop), 1}}));
    }
    return parts;
  }

 protected:
  array_base() noexcept : layout_(empty_layout()) {}
  array_base(array_base const&) = default;
  array_base& operator=(array_base const&) = default;
  // The implicit moves would move the owner but copy data_ and layout_, leaving a handle that
  // still addresses memory it no longer keeps alive; these leave the source empty instead.
  array_base(array_base&& other) noexcept
      : owner_(std::exchange(other.owner_, Owner{})),  // a moved-from Owner may keep its address
        data_(std::exchange(other.data_, nullptr)),
        layout_(std::exchange(other.layout_, empty_layout())) {}
  array_base& operator=(array_base&& other) noexcept {
    if (this != &other) {
      owner_ = std::exchange(other.owner_, Owner{});
      data_ = std::exchange(other.data_, nullptr);
      layout_ = std::exchange(other.layout_, empty_layout());
    }
    return *this;
  }
  ~array_base() = default;

  array_base(Owner owner, T* data, array_layout const& layout)
      : owner_(std::move(owner)), data_(data), layout_(layout) {
    GPUMEM_EXPECTS(layout.itemsize == sizeof(T),
                   "array layout itemsize " + std::to_string(layout.itemsize) +
                       " differs from the element size " + std::to_string(sizeof(T)));
  }

  // The layout of a default-constructed array: shape (0,), contiguous. Built by hand (rather than
  // with array_layout::contiguous, which allocates vectors) so that moves stay noexcept.
  static array_layout empty_layout() noexcept {
    array_layout l;
    l.rank = 1;
    l.itemsize = sizeof(T);
    l.shape[0] = 0;
    l.strides[0] = static_cast<std::ptrdiff_t>(sizeof(T));
    return l;
  }

  static T* advance(T* p, std::ptrdiff_t byte_offset) noexcept {
    return p == nullptr ? p
                        : reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(p) + byte_offset);
  }

  Derived derive(array_layout::derived const& part) const {
    Derived out = static_cast<Derived const&>(*this);
    out.data_ = advance(data_, part.byte_offset);
    out.layout_ = part.layout;
    return out;
  }

  Owner owner_{};
  T* data_ = nullptr;
  array_layout layout_{};
};

// Checks that `layout` placed at byte `offset` of a buffer of `bytes` bytes stays inside it.
void check_fits(array_layout const& layout, std::size_t offset, std::size_t bytes,
                char const* what);

}  // namespace gpumem::detail
