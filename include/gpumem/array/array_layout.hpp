// gpumem/array/array_layout.hpp
//
// The shape and strides of an N-dimensional array (NumPy's model): `shape[d]` elements along
// dimension d, `strides[d]` BYTES between neighbours along d (negative after a reversing slice),
// `itemsize` bytes per element. An element's address is data + sum(index[d] * strides[d]), where
// `data` points at element (0, ..., 0).
//
// The layout is a fixed-size, trivially copyable value (rank <= max_array_rank), so a kernel takes
// it by value inside an array_view; its accessors are GPUMEM_HD. Everything that validates or
// derives a layout (make, slice, reshape, ...) is host code and throws gpumem::logic_error with a
// message that names the bad value.
//
// Slices: slice{start, stop, step} selects [start, stop) of a dimension; out-of-range bounds are
// an error (NOT clamped as in Python). A negative step walks the same half-open range backwards
// from its last element: slice{0, n, -1} reverses, slice{0, n, -2} takes n-1, n-3, ...
#pragma once

#include <gpumem/core/config.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gpumem {

inline constexpr int max_array_rank = 8;

// Memory order of a contiguous array: C (last index fastest) or Fortran (first index fastest).
enum class array_order { c, fortran };

struct slice {
  static constexpr std::ptrdiff_t end = std::numeric_limits<std::ptrdiff_t>::max();
  std::ptrdiff_t start = 0;
  std::ptrdiff_t stop = end;  // `end`: the dimension's length
  std::ptrdiff_t step = 1;
  static slice all() { return {}; }
};

using shape_type = std::vector<std::size_t>;
using strides_type = std::vector<std::ptrdiff_t>;

struct array_layout {
  int rank = 0;
  std::size_t itemsize = 1;
  std::size_t shape[max_array_rank] = {};
  std::ptrdiff_t strides[max_array_rank] = {};

  // Number of elements (1 for rank 0, 0 when any dimension is 0).
  GPUMEM_HD std::size_t size() const {
    std::size_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
  GPUMEM_HD std::size_t nbytes() const { return size() * itemsize; }
  // Byte offset of the element at `index` (rank entries) from element (0, ..., 0).
  GPUMEM_HD std::ptrdiff_t offset_of(std::size_t const* index) const {
    std::ptrdiff_t off = 0;
    for (int d = 0; d < rank; ++d)
      off += static_cast<std::ptrdiff_t>(index[d]) * strides[d];
    return off;
  }
  // Byte offset of the element with C-order linear number `linear` (0 <= linear < size()).
  GPUMEM_HD std::ptrdiff_t offset_of_linear(std::size_t linear) const {
    std::ptrdiff_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += static_cast<std::ptrdiff_t>(linear % shape[d]) * strides[d];
      linear /= shape[d];
    }
    return off;
  }

  // --- host: construction and validation (throw gpumem::logic_error naming the bad value) ---

  // A contiguous layout of `shape` in `order`.
  static array_layout contiguous(shape_type const& shape, std::size_t itemsize,
                                 array_order order = array_order::c);
  // A strided layout; every stride must be a multiple of `itemsize` (elements stay aligned).
  static array_layout strided(shape_type const& shape, strides_type const& strides,
                              std::size_t itemsize);

  bool is_c_contiguous() const noexcept;
  bool is_f_contiguous() const noexcept;
  bool is_contiguous() const noexcept { return is_c_contiguous() || is_f_contiguous(); }
  // The order of a dense host buffer that mirrors this array: Fortran for an array that is
  // Fortran- but not C-contiguous, otherwise C.
  array_order natural_order() const noexcept;

  // The bytes the elements touch, relative to element (0, ..., 0): [lowest, highest) — for an
  // empty array {0, 0}. A buffer must cover this range.
  struct byte_extent {
    std::ptrdiff_t lowest = 0;
    std::ptrdiff_t highest = 0;
  };
  byte_extent extent() const noexcept;

  shape_type shape_vector() const { return shape_type(shape, shape + rank); }
  strides_type strides_vector() const { return strides_type(strides, strides + rank); }

  // A layout of the selected part and the byte offset of its first element. Fewer slices than
  // dimensions: the rest are taken whole.
  struct derived;
  derived sliced(std::vector<slice> const& slices) const;
  // Fixes dimension `dim` at `index` (the rank drops by one).
  derived selected(int dim, std::size_t index) const;
  // The same elements viewed with another shape; the layout must be contiguous in `order`.
  array_layout reshaped(shape_type const& new_shape, array_order order = array_order::c) const;
  // "shape (2, 3), strides (24, 8) bytes" — for messages.
  std::string describe() const;
};

struct array_layout::derived {
  array_layout layout;
  std::ptrdiff_t byte_offset = 0;
};

std::string to_string(shape_type const& shape);

}  // namespace gpumem
