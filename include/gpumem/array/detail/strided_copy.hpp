// gpumem/array/detail/strided_copy.hpp
//
// The one element-copy routine of the array layer. Copies every element of `src` to the element
// with the same index in `dst` (same shape and itemsize, else logic_error naming both). The index
// space is cut into runs that are contiguous in BOTH layouts, so dense arrays move in one copy and
// a slice of rows in one copy per row. With a stream the copies are asynchronous on it; without,
// each returns when done. Overlapping source and destination are not supported.
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/cuda/device_backend.hpp>

namespace gpumem::detail {

enum class copy_mode { synchronous, asynchronous };

void copy_elements(void* dst, array_layout const& dst_layout, void const* src,
                   array_layout const& src_layout, copy_mode mode, stream_handle stream);

}  // namespace gpumem::detail
