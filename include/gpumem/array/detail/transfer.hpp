// gpumem/array/detail/transfer.hpp
//
// The copy entry every array type uses: checks shapes, copies through copy_elements, and for an
// asynchronous copy hands the owners of both sides to the stream's keep-alive list, so that
// memory an in-flight copy touches cannot be freed by dropping the last array handle.
//
// Overlapping sides (two views of one array, e.g. a[0:4] = a[3::-1]) get NumPy's result: when the
// bytes the source reaches intersect those the destination reaches, the source is first copied to
// a contiguous temporary in the same kind of memory (device, pinned, mapped, managed, host), then
// the temporary to the destination. An elementwise copy would otherwise read elements it has
// already overwritten, and one dense cudaMemcpy over overlapping ranges is undefined. Addresses are
// compared as numbers, which is sound under CUDA's unified addressing (every 64-bit platform):
// device and host memory never share an address.
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/detail/strided_copy.hpp>
#include <gpumem/array/host_span.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/core/error.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace gpumem::detail {

// A contiguous temporary: its first byte and what keeps it alive.
struct staging_buffer {
  void* data = nullptr;
  std::shared_ptr<void> owner;
};
// Makes a staging buffer of `bytes` (> 0) bytes.
using make_staging_fn = staging_buffer (*)(std::size_t bytes);

// Device memory from the current context's memory manager (any side's fallback: under unified
// addressing every kind of memory copies to and from it).
staging_buffer device_staging_buffer(std::size_t bytes);
// Ordinary host memory, for a side that is a foreign host buffer.
staging_buffer host_staging_buffer(std::size_t bytes);

struct copy_side {
  void* data;
  array_layout layout;
  std::shared_ptr<void> owner;  // null for foreign host memory (the caller keeps it alive)
  // A temporary in this side's kind of memory, for staging an overlapping copy from this side;
  // null: device_staging_buffer.
  make_staging_fn make_staging = nullptr;
};

// Copies every element of `src` into `dst` (same shape and itemsize, else logic_error naming
// both), staging the source when the two overlap (see the file comment). Without a stream the copy
// has completed on return; with one it is asynchronous on it, and the owners of both sides and of
// any temporary are kept alive until the stream has passed it.
void transfer(copy_side const& dst, copy_side const& src, stream const* s);

// The side of a dense host buffer that mirrors `like` (its shape, in its natural order).
template <class T>
copy_side host_side(host_span<T> span, array_layout const& like, char const* what) {
  GPUMEM_EXPECTS(span.size() == like.size(), std::string(what) + ": the host buffer has " +
                                                 std::to_string(span.size()) +
                                                 " elements, the array (" + like.describe() +
                                                 ") has " + std::to_string(like.size()));
  using raw = std::remove_const_t<T>;
  return {const_cast<raw*>(span.data()),
          array_layout::contiguous(like.shape_vector(), like.itemsize, like.natural_order()),
          nullptr, &host_staging_buffer};
}

// A new one-dimensional array of the same type as Array (so in the same kind of memory) holding
// `bytes` bytes.
template <class Array>
staging_buffer staging_like(std::size_t bytes) {
  Array temporary(shape_type{bytes / sizeof(typename Array::value_type)});
  return {temporary.data(), temporary.share_owner()};
}

template <class Array>
copy_side array_side(Array const& a) {
  return {a.data(), a.layout(), a.share_owner(), &staging_like<typename Array::array_type>};
}

}  // namespace gpumem::detail
