// buffer (see buffer.hpp): allocation through the current memory manager, views, slices and
// transfers. Transfers are one-dimensional byte arrays handed to the array layer's copy routine,
// which also keeps both sides alive on a stream.
#include "buffer_storage.hpp"
#include "spill_registry.hpp"

#include <gpumem/array/array_layout.hpp>
#include <gpumem/array/detail/transfer.hpp>
#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/mr/memory_resource.hpp>

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
  // A tracked record allocated its memory itself and is its only keeper (its memory_pointer or
  // host_memory never leaves it), so it shares memory with no other record. Its owner_ is not
  // read: a spill or an unspill on another thread replaces it under the record's mutex. Untracked
  // records never change theirs, so the comparisons below need no lock.
  if (tracked_ || other.tracked_) return false;
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

// Copies `bytes` from src to dst through the array layer; with a stream, asynchronously on it,
// keeping both owners alive until the stream has passed the copy.
void copy_bytes(void* dst, std::shared_ptr<void> dst_owner, void const* src,
                std::shared_ptr<void> src_owner, std::size_t bytes, stream const* s) {
  if (bytes == 0) return;
  array_layout const layout = array_layout::contiguous(shape_type{bytes}, 1);
  transfer(copy_side{dst, layout, std::move(dst_owner)},
           copy_side{const_cast<void*>(src), layout, std::move(src_owner)}, s);
}

// The registry of the global spill manager, when there is one for the current device: it adopts
// every device buffer made now that names no manager and did not opt out.
std::shared_ptr<spill_registry> global_spill_registry() {
  std::shared_ptr<spill_manager> global = global_spill_manager();
  if (global != nullptr && global->device() == backend().current_device())
    return global->registry();
  return nullptr;
}

// What buffer_options ask of a new storage of `memory`.
buffer_storage::tracking tracking_for(buffer_options const& options) {
  buffer_storage::tracking track;
  track.copy_on_write = options.copy_on_write;
  GPUMEM_EXPECTS(options.spillable || options.spill == nullptr,
                 "buffer: buffer_options::spillable is false (never spillable) but a spill manager "
                 "is named in buffer_options::spill: give one or the other");
  track.opted_out = !options.spillable;
  if (options.spill != nullptr) {
    GPUMEM_EXPECTS(
        options.memory == buffer_memory::device,
        std::string("buffer: only device memory is spillable, not ") + to_string(options.memory));
    track.spill = options.spill->registry();
  } else if (options.memory == buffer_memory::device && options.spillable) {
    track.spill = global_spill_registry();
  }
  return track;
}

// The address of [storage + offset] for an operation of the buffer layer, and an owner that keeps
// it valid (on the device, for a tracked storage) until it is released — after a synchronous copy
// returns, or when a stream has passed an asynchronous one.
std::pair<void*, std::shared_ptr<void>> pinned_address(
    std::shared_ptr<buffer_storage> const& storage, std::size_t offset) {
  if (storage == nullptr) return {nullptr, nullptr};
  if (!storage->tracked()) return {static_cast<unsigned char*>(storage->base()) + offset, storage};
  auto pin = std::make_shared<storage_pin>(storage);
  void* const address = static_cast<unsigned char*>(pin->address()) + offset;
  return {address, std::move(pin)};
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
    : storage_(std::move(storage)), offset_(offset), size_(size), memory_(memory) {
  if (storage_ != nullptr && storage_->copy_on_write()) storage_->add_slice();
}

buffer::buffer(std::size_t bytes, buffer_memory memory)
    : buffer(bytes, buffer_options{memory, false, nullptr, true}) {}

buffer::buffer(std::size_t bytes, buffer_options const& options)
    : size_(bytes), memory_(options.memory) {
  detail::buffer_storage::tracking track = detail::tracking_for(options);
  if (bytes == 0) return;
  storage_ = detail::allocate_storage(bytes, options.memory, track);
  if (storage_->copy_on_write()) storage_->add_slice();
  // A soft device limit applies from creation (a limit of 0 spills the new buffer at once).
  if (storage_->registry() != nullptr) storage_->registry()->enforce_limit();
}

buffer::buffer(buffer const& other)
    : storage_(other.storage_), offset_(other.offset_), size_(other.size_), memory_(other.memory_) {
  if (storage_ == nullptr || !storage_->copy_on_write()) return;
  if (storage_->where() == detail::residence::exposed) {
    // A shallow copy of an exposed buffer is a true copy (cuDF's copy-on-write rule): a third
    // party may write through the exposed address, and a copy must not see those writes.
    storage_.reset();
    *this = other.copy_on(nullptr, true);
    return;
  }
  storage_->add_slice();
}

buffer::buffer(buffer&& other) noexcept
    : storage_(std::move(other.storage_)),
      offset_(std::exchange(other.offset_, 0)),
      size_(std::exchange(other.size_, 0)),
      memory_(other.memory_) {}

buffer& buffer::operator=(buffer const& other) {
  if (this != &other) {
    buffer copy(other);
    *this = std::move(copy);
  }
  return *this;
}

buffer& buffer::operator=(buffer&& other) noexcept {
  if (this != &other) {
    release();
    storage_ = std::move(other.storage_);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
    memory_ = other.memory_;
  }
  return *this;
}

buffer::~buffer() {
  release();
}

void buffer::release() noexcept {
  if (storage_ != nullptr && storage_->copy_on_write()) storage_->remove_slice();
  storage_.reset();
}

// One rule for every new storage that takes a buffer's bytes (copy(), as_copy_on_write(), a
// write's unsharing, the true copy of an exposed handle): it is made as the original was, with the
// options as they apply now. A copy keeps the original's spill manager; one of a buffer that has
// none is adopted by a global spill manager of the current device, as any device buffer made now
// is, unless the original opted out (buffer_options::spillable = false), which the copy keeps.
buffer buffer::allocate_like(std::size_t bytes, detail::buffer_storage const& like,
                             bool copy_on_write) {
  detail::buffer_storage::tracking track = like.tracking_options();
  track.copy_on_write = copy_on_write;
  if (track.spill == nullptr && !track.opted_out && like.memory() == buffer_memory::device)
    track.spill = detail::global_spill_registry();
  buffer out;
  out.size_ = bytes;
  out.memory_ = like.memory();
  if (bytes == 0) return out;
  out.storage_ = detail::allocate_storage(bytes, like.memory(), std::move(track));
  if (out.storage_->copy_on_write()) out.storage_->add_slice();
  return out;
}

buffer buffer::allocate_from_host(void const* data, std::size_t bytes, stream const* s,
                                  buffer_options const& options) {
  detail::check_host_pointer(data, bytes, "buffer::from_host");
  buffer out;
  out.size_ = bytes;
  out.memory_ = options.memory;
  detail::buffer_storage::tracking track = detail::tracking_for(options);
  if (bytes == 0) return out;
  out.storage_ = detail::allocate_storage(bytes, options.memory, std::move(track));
  if (out.storage_->copy_on_write()) out.storage_->add_slice();
  {
    auto dst = detail::pinned_address(out.storage_, 0);
    detail::copy_bytes(dst.first, std::move(dst.second), data, nullptr, bytes, s);
  }
  // The limit is applied once the bytes are in (it may spill them at once).
  if (out.storage_->registry() != nullptr) out.storage_->registry()->enforce_limit();
  return out;
}

buffer buffer::from_host(void const* data, std::size_t bytes, buffer_memory memory) {
  return allocate_from_host(data, bytes, nullptr, buffer_options{memory, false, nullptr, true});
}

buffer buffer::from_host(void const* data, std::size_t bytes, stream const& s,
                         buffer_memory memory) {
  return allocate_from_host(data, bytes, &s, buffer_options{memory, false, nullptr, true});
}

buffer buffer::from_host(void const* data, std::size_t bytes, buffer_options const& options) {
  return allocate_from_host(data, bytes, nullptr, options);
}

buffer buffer::from_host(void const* data, std::size_t bytes, stream const& s,
                         buffer_options const& options) {
  return allocate_from_host(data, bytes, &s, options);
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

void* buffer::tracked_ptr(access, char const* file, int line) const {
  detail::buffer_storage& storage = *storage_;
  void* base = nullptr;
  if (spill_lock* lock = spill_lock::current()) {
    if (lock->holds(&storage)) {
      base = storage.acquire(detail::pointer_use::lend, file, line);
      storage.unpin();
    } else {
      lock->remember(storage_);
      try {
        base = storage.acquire(detail::pointer_use::lend, file, line);
      } catch (...) {
        lock->forget_last();
        throw;
      }
    }
  } else {
    base = storage.acquire(detail::pointer_use::expose, file, line);
  }
  return static_cast<unsigned char*>(base) + offset_;
}

void buffer::hold_in(spill_lock& lock) const {
  if (storage_ == nullptr || !storage_->tracked() || lock.holds(storage_.get())) return;
  lock.remember(storage_);
  try {
    (void)storage_->acquire(detail::pointer_use::pin, nullptr, 0);
  } catch (...) {
    lock.forget_last();
    throw;
  }
}

void buffer::unshare() {
  // Other slices share the owner: this one gets its own copy of its range (the owner is unspilled
  // first when it is spilled), and the others keep the owner.
  *this = copy_on(nullptr, true);
}

void* buffer::get_ptr(access mode, char const* file, int line) {
  if (storage_ == nullptr) return nullptr;
  if (!storage_->tracked()) return const_cast<void*>(address());
  // An exposed owner is never unshared: a third party may hold its address and write through it,
  // and moving this handle away would leave those writes behind. Its slices share it for good.
  if (mode == access::write && storage_->copy_on_write() && storage_->slices() > 1 &&
      storage_->where() != detail::residence::exposed)
    unshare();
  return tracked_ptr(mode, file, line);
}

void* buffer::expose(char const* file, int line) {
  if (storage_ == nullptr) return nullptr;
  if (!storage_->tracked()) return const_cast<void*>(address());
  void* const base = storage_->acquire(detail::pointer_use::expose, file, line);
  return static_cast<unsigned char*>(base) + offset_;
}

void const* buffer::get_ptr(access mode, char const* file, int line) const {
  GPUMEM_EXPECTS(mode == access::read,
                 "buffer::get_ptr: write access asked for through a const buffer");
  if (storage_ == nullptr) return nullptr;
  if (!storage_->tracked()) return address();
  return tracked_ptr(mode, file, line);
}

bool buffer::is_spillable() const noexcept {
  return storage_ != nullptr && storage_->spillable();
}

bool buffer::is_spilled() const noexcept {
  return storage_ != nullptr && storage_->where() == detail::residence::spilled;
}

bool buffer::is_exposed() const noexcept {
  return storage_ != nullptr && storage_->tracked() &&
         storage_->where() == detail::residence::exposed;
}

bool buffer::is_copy_on_write() const noexcept {
  return storage_ != nullptr && storage_->copy_on_write();
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

buffer buffer::copy_on(stream const* s, bool copy_on_write) const {
  if (storage_ == nullptr) return buffer(size_, memory_);
  buffer out = allocate_like(size_, *storage_, copy_on_write);
  {
    auto src = detail::pinned_address(storage_, offset_);
    auto dst = detail::pinned_address(out.storage_, 0);
    detail::copy_bytes(dst.first, std::move(dst.second), src.first, std::move(src.second), size_,
                       s);
  }
  if (out.storage_ != nullptr && out.storage_->registry() != nullptr)
    out.storage_->registry()->enforce_limit();
  return out;
}

buffer buffer::as_copy_on_write() const {
  if (storage_ == nullptr || storage_->copy_on_write()) return *this;
  return copy_on(nullptr, true);
}

bool buffer::is_aligned(std::size_t alignment) const {
  GPUMEM_EXPECTS(alignment != 0 && (alignment & (alignment - 1)) == 0,
                 "buffer::is_aligned: " + std::to_string(alignment) + " is not a power of two");
  if (storage_ == nullptr) return true;
  if (!storage_->tracked()) return reinterpret_cast<std::uintptr_t>(address()) % alignment == 0;
  if (alignment <= default_alignment) return offset_ % alignment == 0;
  // Above what every allocation guarantees: look at the address (held, not exposed).
  spill_lock lock;
  return reinterpret_cast<std::uintptr_t>(get_ptr(access::read)) % alignment == 0;
}

buffer buffer::copy() const {
  return copy_on(nullptr, is_copy_on_write());
}
buffer buffer::copy(stream const& s) const {
  return copy_on(&s, is_copy_on_write());
}

void buffer::copy_out(void* dst, std::size_t bytes, stream const* s) const {
  GPUMEM_EXPECTS(bytes <= size_, "buffer::copy_to_host: " + std::to_string(bytes) +
                                     " bytes asked for from a buffer of " + std::to_string(size_) +
                                     " bytes");
  detail::check_host_pointer(dst, bytes, "buffer::copy_to_host");
  if (bytes == 0) return;
  {
    auto src = detail::pinned_address(storage_, offset_);
    detail::copy_bytes(dst, nullptr, src.first, std::move(src.second), bytes, s);
  }
  // A synchronous read is done with the bytes: the limit applies again (an asynchronous one keeps
  // them pinned until its stream has passed the copy).
  if (s == nullptr && storage_->registry() != nullptr) storage_->registry()->enforce_limit();
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
