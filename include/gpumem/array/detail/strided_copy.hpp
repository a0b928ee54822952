// gpumem/array/detail/strided_copy.hpp
//
// The one element-copy routine of the array layer. Copies every element of `src` to the element
// with the same index in `dst` (same shape and itemsize, else logic_error naming both). The index
// space is cut into runs that are contiguous in BOTH layouts, so dense arrays move in one copy and
// a slice of rows in one copy per row. With a stream the copies are asynchronous on it; without,
// each returns when done. Source and destination must not overlap (extents_overlap() false):
// detail::transfer stages overlapping copies through a temporary before they reach this routine.
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/cuda/device_backend.hpp>

namespace gpumem::detail {

enum class copy_mode { synchronous, asynchronous };

// Throws logic_error naming both layouts unless they have the same shape and itemsize.
void check_same_shape(array_layout const& dst_layout, array_layout const& src_layout);

// Whether the bytes that the elements of `a` and of `b` reach (layout extents placed at the two
// addresses) intersect. Empty arrays reach no byte.
bool extents_overlap(void const* a, array_layout const& a_layout, void const* b,
                     array_layout const& b_layout) noexcept;

void copy_elements(void* dst, array_layout const& dst_layout, void const* src,
                   array_layout const& src_layout, copy_mode mode, stream_handle stream);

}  // namespace gpumem::detail
