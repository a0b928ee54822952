// gpumem/array/array_view.hpp
//
// The non-owning view of an array that a kernel takes by value: a data pointer and a layout
// (shape and byte strides). Trivially copyable; every member is GPUMEM_HD. It does not keep the
// memory alive: the owning array (device_array, mapped_array, managed_array) must outlive the
// work that uses the view — keep the array, or hand it to stream::keep_alive(), until the stream
// has passed that work.
//
// Indexing is not bounds-checked (device code never throws); `contains()` lets a kernel check.
// operator() takes exactly one index per dimension: a different count is a bug of the caller,
// caught by GPUMEM_ASSERT where asserts are on (host code of debug builds); elsewhere the missing
// trailing indices read as 0 (never memory past the index list).
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/core/assert.hpp>
#include <gpumem/core/config.hpp>

#include <cstddef>
#include <type_traits>

namespace gpumem {

template <class T>
class array_view {
 public:
  array_view() = default;
  GPUMEM_HD array_view(T* data, array_layout const& layout) : data_(data), layout_(layout) {}

  GPUMEM_HD T* data() const { return data_; }
  GPUMEM_HD array_layout const& layout() const { return layout_; }
  GPUMEM_HD int ndim() const { return layout_.rank; }
  GPUMEM_HD std::size_t size() const { return layout_.size(); }
  GPUMEM_HD std::size_t shape(int dim) const { return layout_.shape[dim]; }
  // Stride of `dim` in bytes.
  GPUMEM_HD std::ptrdiff_t stride(int dim) const { return layout_.strides[dim]; }

  // Element at the given indices (exactly one per dimension).
  template <class... I>
  GPUMEM_HD T& operator()(I... indices) const {
    static_assert(sizeof...(I) <= max_array_rank, "too many indices");
    GPUMEM_ASSERT(static_cast<int>(sizeof...(I)) == layout_.rank,
                  "array_view: give exactly one index per dimension");
    // offset_of reads `rank` entries: the list is max_array_rank long, zero past the indices.
    std::size_t const index[max_array_rank] = {static_cast<std::size_t>(indices)...};
    return *element(layout_.offset_of(index));
  }
  // The element with C-order linear number `i` (any rank): for loops over every element.
  GPUMEM_HD T& operator[](std::size_t i) const { return *element(layout_.offset_of_linear(i)); }

  template <class... I>
  GPUMEM_HD bool contains(I... indices) const {
    if (static_cast<int>(sizeof...(I)) != layout_.rank) return false;
    std::size_t const index[] = {static_cast<std::size_t>(indices)..., 0};
    for (int d = 0; d < layout_.rank; ++d)
      if (index[d] >= layout_.shape[d]) return false;
    return true;
  }

 private:
  GPUMEM_HD T* element(std::ptrdiff_t byte_offset) const {
    using byte = std::conditional_t<std::is_const_v<T>, unsigned char const, unsigned char>;
    return reinterpret_cast<T*>(reinterpret_cast<byte*>(data_) + byte_offset);
  }

  T* data_ = nullptr;
  array_layout layout_{};
};

}  // namespace gpumem
