// The storage record behind buffer handles (see buffer.hpp): the base address and size of one
// range of memory, its kind, and what keeps it alive — the memory manager's pointer for memory a
// buffer allocated, or the owner handed to buffer::view.
//
// Every handle, slice and copy of a handle shares one record; the memory goes when the record
// does. The record is immutable after construction, which is what makes sharing it between
// threads safe today. A spillable or copy-on-write storage will keep its moving parts (where the
// bytes are now, exposure, the handles that share it) here, behind buffer::get_ptr(access).
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>
#include <memory>
#include <variant>

namespace gpumem::detail {

// How the memory came to the buffer layer: allocated for a buffer, or existing memory viewed.
enum class buffer_origin { allocated, viewed };

class buffer_storage {
 public:
  // What keeps the memory alive: device or managed memory of a manager, pinned host memory, or a
  // foreign owner (may be empty).
  using keeper = std::variant<memory_pointer, host_memory, std::shared_ptr<void>>;

  buffer_storage(void* base, std::size_t size, buffer_memory memory, buffer_origin origin,
                 keeper owner) noexcept
      : base_(base), size_(size), memory_(memory), origin_(origin), owner_(std::move(owner)) {}
  buffer_storage(buffer_storage const&) = delete;
  buffer_storage& operator=(buffer_storage const&) = delete;

  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  buffer_memory memory() const noexcept { return memory_; }
  buffer_origin origin() const noexcept { return origin_; }
  // True when both records keep the same allocation or the same foreign owner alive.
  bool keeps_same_owner(buffer_storage const& other) const noexcept;

 private:
  void* base_;
  std::size_t size_;
  buffer_memory memory_;
  buffer_origin origin_;
  keeper owner_;
};

}  // namespace gpumem::detail
