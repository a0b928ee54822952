// buffer (see buffer.hpp): allocation through the current memory manager, views, slices and
// transfers. Transfers are one-dimensional byte arrays handed to the array layer's copy routine,
// which also keeps both sides alive on a stream.
#include "buffer_storage.hpp"

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/detail/transfer.hpp>
#include <gpumem/buffer/buffer.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace gpumem {

char const* to_string(buffer_memory memory) noexcept {
  switch (memory) {
    case buffer_memory::device:
      return "device";
    case buffer_memory::pinned:
      return "pinned";
    case buffer_memory::managed:
      return "managed";
  }
  return "unknown";
}

namespace detail {

bool buffer_storage::keeps_same_owner(buffer_storage const& other) const noexcept {
  if (this == &other) return true;
  if (auto const* a = std::get_if<memory_pointer>(&owner_)) {
    auto const* b = std::get_if<memory_pointer>(&other.owner_);
    return b != nullptr && a->shares_owner_with(*b);
  }
  if (auto const* a = std::get_if<host_memory>(&owner_)) {
    // Two live host_memory objects with one address come from one allocation.
    auto const* b = std::get_if<host_memory>(&other.owner_);
    return b != nullptr && a->host_pointer() != nullptr && a->host_pointer() == b->host_pointer();
  }
  auto const& a = std::get<std::shared_ptr<void>>(owner_);
  auto const* b = std::get_if<std::shared_ptr<void>>(&other.owner_);
  return b != nullptr && a != nullptr && *b != nullptr && !a.owner_before(*b) &&
         !b->owner_before(a);
}

namespace {

std::shared_ptr<buffer_storage> allocate_storage(std::size_t bytes, buffer_memory memory) {
  gpumem::memory_manager& manager = current_context().memory_manager();
  switch (memory) {
    case buffer_memory::pinned: {
      host_memory h = manager.memhostalloc(bytes, host_alloc_flags{});
      void* base = h.host_pointer();
      return std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                              std::move(h));
    }
    case buffer_memory::managed: {
      // Attached globally: usable from any stream, as device buffers are.
      managed_memory m = manager.memallocmanaged(bytes, true);
      void* base = m.host_pointer();
      return std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                              memory_pointer(std::move(m)));
    }
    case buffer_memory::device:
      break;
  }
  memory_pointer p = manager.memalloc(bytes);
  void* base = p.device_pointer();
  return std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                          std::move(p));
}

// Copies `bytes` from src to dst through the array layer; with a stream, asynchronously on it,
// keeping both owners alive until the stream has passed the copy.
void copy_bytes(void* dst, std::shared_ptr<void> dst_owner, void const* src,
                std::shared_ptr<void> src_owner, std::size_t bytes, stream const* s) {
  if (bytes == 0) return;
  array_layout const layout = array_layout::contiguous(shape_type{bytes}, 1);
  transfer(copy_side{dst, layout, std::move(dst_owner)},
           copy_side{const_cast<void*>(src), layout, std::move(src_owner)}, s);
}

void check_host_pointer(void const* data, std::size_t bytes, char const* what) {
  GPUMEM_EXPECTS(data != nullptr || bytes == 0,
                 std::string(what) + ": null host pointer for " + std::to_string(bytes) + " bytes");
}

}  // namespace
}  // namespace detail

buffer::buffer() noexcept = default;

buffer::buffer(std::shared_ptr<detail::buffer_storage> storage, std::size_t offset,
               std::size_t size, buffer_memory memory) noexcept
    : storage_(std::move(storage)), offset_(offset), size_(size), memory_(memory) {}

buffer::buffer(std::size_t bytes, buffer_memory memory)
    : storage_(bytes == 0 ? nullptr : detail::allocate_storage(bytes, memory)),
      size_(bytes),
      memory_(memory) {}

buffer buffer::allocate_from_host(void const* data, std::size_t bytes, stream const* s,
                                  buffer_memory memory) {
  detail::check_host_pointer(data, bytes, "buffer::from_host");
  buffer out(bytes, memory);
  detail::copy_bytes(out.get_ptr(access::write), out.share_owner(), data, nullptr, bytes, s);
  return out;
}

buffer buffer::from_host(void const* data, std::size_t bytes, buffer_memory memory) {
  return allocate_from_host(data, bytes, nullptr, memory);
}

buffer buffer::from_host(void const* data, std::size_t bytes, stream const& s,
                         buffer_memory memory) {
  return allocate_from_host(data, bytes, &s, memory);
}

buffer buffer::view(memory_pointer memory, buffer_memory kind) {
  GPUMEM_EXPECTS(kind != buffer_memory::pinned,
                 "buffer::view: a memory_pointer holds device or managed memory, not pinned");
  std::size_t const bytes = memory.size();
  if (bytes == 0) return buffer(nullptr, 0, 0, kind);
  void* base = memory.device_pointer();
  return buffer(std::make_shared<detail::buffer_storage>(
                    base, bytes, kind, detail::buffer_origin::viewed, std::move(memory)),
                0, bytes, kind);
}

buffer buffer::view(managed_memory memory) {
  return view(memory_pointer(std::move(memory)), buffer_memory::managed);
}

buffer buffer::view(host_memory memory) {
  std::size_t const bytes = memory.size();
  if (bytes == 0) return buffer(nullptr, 0, 0, buffer_memory::pinned);
  void* base = memory.host_pointer();
  return buffer(
      std::make_shared<detail::buffer_storage>(base, bytes, buffer_memory::pinned,
                                               detail::buffer_origin::viewed, std::move(memory)),
      0, bytes, buffer_memory::pinned);
}

buffer buffer::view(void* ptr, std::size_t bytes, std::shared_ptr<void> owner,
                    buffer_memory memory) {
  GPUMEM_EXPECTS(ptr != nullptr || bytes == 0,
                 "buffer::view: null pointer for " + std::to_string(bytes) + " bytes");
  std::size_t end = 0;
  GPUMEM_EXPECTS(checked_add(reinterpret_cast<std::uintptr_t>(ptr), bytes, end),
                 "buffer::view: " + std::to_string(bytes) + " bytes from address " +
                     std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                     " wrap the address space");
  if (bytes == 0) return buffer(nullptr, 0, 0, memory);
  return buffer(std::make_shared<detail::buffer_storage>(
                    ptr, bytes, memory, detail::buffer_origin::viewed, std::move(owner)),
                0, bytes, memory);
}

void const* buffer::address() const noexcept {
  if (storage_ == nullptr) return nullptr;
  return static_cast<unsigned char const*>(storage_->base()) + offset_;
}

void* buffer::get_ptr(access) {
  return const_cast<void*>(address());
}

void const* buffer::get_ptr(access mode) const {
  GPUMEM_EXPECTS(mode == access::read,
                 "buffer::get_ptr: write access asked for through a const buffer");
  return address();
}

buffer buffer::slice(std::size_t offset, std::size_t bytes) const {
  std::size_t end = 0;
  GPUMEM_EXPECTS(checked_add(offset, bytes, end) && end <= size_,
                 "buffer::slice: [" + std::to_string(offset) + ", " + std::to_string(offset) +
                     " + " + std::to_string(bytes) + ") is outside the buffer of " +
                     std::to_string(size_) + " bytes");
  if (bytes == 0) return buffer(nullptr, 0, 0, memory_);
  return buffer(storage_, offset_ + offset, bytes, memory_);
}

buffer buffer::copy_on(stream const* s) const {
  buffer out(size_, memory_);
  detail::copy_bytes(out.get_ptr(access::write), out.share_owner(), address(), share_owner(), size_,
                     s);
  return out;
}

buffer buffer::copy() const {
  return copy_on(nullptr);
}
buffer buffer::copy(stream const& s) const {
  return copy_on(&s);
}

void buffer::copy_out(void* dst, std::size_t bytes, stream const* s) const {
  GPUMEM_EXPECTS(bytes <= size_, "buffer::copy_to_host: " + std::to_string(bytes) +
                                     " bytes asked for from a buffer of " + std::to_string(size_) +
                                     " bytes");
  detail::check_host_pointer(dst, bytes, "buffer::copy_to_host");
  detail::copy_bytes(dst, nullptr, address(), share_owner(), bytes, s);
}

void buffer::copy_to_host(void* dst, std::size_t bytes) const {
  copy_out(dst, bytes, nullptr);
}
void buffer::copy_to_host(void* dst, std::size_t bytes, stream const& s) const {
  copy_out(dst, bytes, &s);
}

std::vector<std::byte> buffer::to_host() const {
  std::vector<std::byte> out(size_);
  copy_out(out.data(), size_, nullptr);
  return out;
}

std::vector<std::byte> buffer::to_host(stream const& s) const {
  std::vector<std::byte> out(size_);
  copy_out(out.data(), size_, &s);
  s.synchronize();
  return out;
}

bool buffer::is_view() const noexcept {
  if (storage_ == nullptr) return false;
  return storage_->origin() == detail::buffer_origin::viewed || offset_ != 0 ||
         size_ != storage_->size();
}

bool buffer::owns_same_memory(buffer const& other) const noexcept {
  return storage_ != nullptr && other.storage_ != nullptr &&
         storage_->keeps_same_owner(*other.storage_);
}

std::shared_ptr<void> buffer::share_owner() const noexcept {
  return storage_;
}

}  // namespace gpumem
