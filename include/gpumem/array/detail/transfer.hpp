// gpumem/array/detail/transfer.hpp
//
// The copy entry every array type uses: checks shapes, copies through copy_elements, and for an
// asynchronous copy hands the owners of both sides to the stream's keep-alive list, so that
// memory an in-flight copy touches cannot be freed by dropping the last array handle.
#pragma once

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/detail/strided_copy.hpp>
#include <gpumem/array/host_span.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/core/error.hpp>

#include <memory>
#include <string>
#include <utility>

namespace gpumem::detail {

struct copy_side {
  void* data;
  array_layout layout;
  std::shared_ptr<void> owner;  // null for foreign host memory (the caller keeps it alive)
};

inline void transfer(copy_side const& dst, copy_side const& src, stream const* s) {
  if (s == nullptr) {
    copy_elements(dst.data, dst.layout, src.data, src.layout, copy_mode::synchronous, nullptr);
    return;
  }
  copy_elements(dst.data, dst.layout, src.data, src.layout, copy_mode::asynchronous, s->handle());
  if (dst.owner) s->keep_alive(dst.owner);
  if (src.owner) s->keep_alive(src.owner);
}

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
          nullptr};
}

template <class Array>
copy_side array_side(Array const& a) {
  return {a.data(), a.layout(), a.share_owner()};
}

}  // namespace gpumem::detail
