// gpumem/manager/memory_pointer.hpp
//
// The pointer types a memory manager returns (the spec's MemoryPointer, AutoFreePointer,
// MappedMemory, PinnedMemory and ManagedMemory):
//
//   memory_pointer    device memory (memalloc); views share its owner
//   auto_free_pointer the same ownership (see below); the base of mapped_memory
//   mapped_memory     pinned host memory mapped into the device address space (host + device ptr)
//   managed_memory    managed (unified) memory: one address valid on host and device
//   pinned_memory     pinned host memory not mapped; may keep a foreign owner alive (mempin)
//
// Ownership: every object shares ONE owner record with its copies and views. The finalizer given
// at construction runs exactly once, when the last of them is destroyed — on whichever thread
// that happens. In Numba a MemoryPointer's lifetime is tied to the Python object and an
// AutoFreePointer's to its reference count; in C++ both are the same thing (shared ownership), so
// auto_free_pointer exists for parity and as a distinct type, not for a different behaviour.
// Copy shares (use_count + 1), move transfers (use_count unchanged). A default-constructed
// pointer owns nothing (use_count 0, null address, device() -1); a moved-from memory_pointer is
// such an empty pointer.
//
// The finalizer usually hands the memory back to its manager (which may defer the real free).
// Finalizers must not throw; if one does, the error is logged and swallowed (destructors are
// noexcept). Finalizers must capture shared state, never the manager by reference: a pointer may
// outlive its context (gpumem::close()) and its manager.
//
// owning_context() refers to the context that allocated the memory; it is valid while that
// context exists (gpumem::close() invalidates it, as Numba's close() invalidates arrays).
// device() is that context's device ordinal, recorded at construction: valid after close() too.
//
// Thread safety: as std::shared_ptr — distinct objects sharing one owner may be copied and
// destroyed concurrently; one object is not modified concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

namespace gpumem {

class context;

namespace detail {
// The owner record shared by a pointer, its copies and its views. Runs the finalizer in its
// destructor (exactly once) and then drops `keep_alive`. A manager may derive its own record,
// which frees in its destructor without a std::function (memory_pointer::adopt): one allocation
// per pointer instead of two or three. Such a destructor must not throw.
class allocation_owner {
 public:
  allocation_owner(std::function<void()> finalizer, std::shared_ptr<void> keep_alive) noexcept;
  allocation_owner(allocation_owner const&) = delete;
  allocation_owner& operator=(allocation_owner const&) = delete;
  virtual ~allocation_owner();

  std::shared_ptr<void> const& keep_alive() const noexcept { return keep_alive_; }

  // memory_pointer::release_idle on the last owner: free the memory now, the caller guaranteeing
  // that no device work uses it any more. Returns true when it freed (the destructor then frees
  // nothing); false to leave the memory to the destructor's usual path (this default).
  virtual bool free_idle() noexcept { return false; }

 protected:
  allocation_owner() noexcept = default;  // for derived records that free by themselves

 private:
  std::function<void()> finalizer_;
  std::shared_ptr<void> keep_alive_;
};

// ctx.device(), for the inline members below (context.hpp includes this header).
int context_device(context const& ctx) noexcept;
}  // namespace detail

class memory_pointer {
 public:
  memory_pointer() = default;
  memory_pointer(memory_pointer const&) = default;
  memory_pointer& operator=(memory_pointer const&) = default;
  // Leaves `other` empty, as a default-constructed pointer (not only without an owner: no
  // address, no context, device() -1).
  memory_pointer(memory_pointer&& other) noexcept
      : ctx_(std::exchange(other.ctx_, nullptr)),
        device_(std::exchange(other.device_, -1)),
        ptr_(std::exchange(other.ptr_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        offset_(std::exchange(other.offset_, 0)),
        owner_(std::move(other.owner_)) {}
  memory_pointer& operator=(memory_pointer&& other) noexcept {
    if (this != &other) {
      ctx_ = std::exchange(other.ctx_, nullptr);
      device_ = std::exchange(other.device_, -1);
      ptr_ = std::exchange(other.ptr_, nullptr);
      size_ = std::exchange(other.size_, 0);
      offset_ = std::exchange(other.offset_, 0);
      owner_ = std::move(other.owner_);  // last: may run the previous owner's finalizer
    }
    return *this;
  }
  ~memory_pointer() = default;
  // Owns [ptr, ptr + size) of memory allocated in `ctx`; `finalizer` (may be empty) runs once
  // when the last owner goes.
  memory_pointer(context& ctx, void* ptr, std::size_t size, std::function<void()> finalizer = {});
  // Owns [ptr, ptr + size) through `owner`, a record derived from detail::allocation_owner whose
  // destructor frees the memory (for managers: no std::function per pointer).
  static memory_pointer adopt(context& ctx, void* ptr, std::size_t size,
                              std::shared_ptr<detail::allocation_owner> owner) noexcept {
    return memory_pointer(&ctx, detail::context_device(ctx), ptr, size, 0, std::move(owner));
  }

  void* device_pointer() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  // Number of pointers and views sharing the owner (0 for an empty pointer).
  long use_count() const noexcept { return owner_ ? owner_.use_count() : 0; }
  // A pointer to [offset, offset + size) of this one that shares its owner. Throws
  // gpumem::logic_error (naming offset, size and this size) when the range is outside.
  memory_pointer view(std::size_t offset, std::size_t size) const;
  // [offset, end).
  memory_pointer view(std::size_t offset) const;
  // Offset of device_pointer() from the start of the memory the owner was created with (0 for a
  // pointer that is not a view). The IPC handle of a view records it.
  std::size_t offset_in_owner() const noexcept { return offset_; }
  // The context that allocated the memory. Throws logic_error on an empty pointer.
  context& owning_context() const;
  // The device of that context (-1 for an empty pointer); unlike owning_context(), still valid
  // after the context was closed.
  int device() const noexcept { return device_; }
  // True when this pointer owns something.
  explicit operator bool() const noexcept { return owner_ != nullptr; }
  // True when both share one owner (one is a view or copy of the other).
  bool shares_owner_with(memory_pointer const& other) const noexcept {
    return owner_ != nullptr && owner_ == other.owner_;
  }
  // Empties this pointer, as assigning memory_pointer() does, for a caller that KNOWS no device
  // work uses the memory any more (it waited for every stream that used it). When this is the
  // last owner and the manager's owner record supports it, the memory is freed at once, without
  // the deferred queue and the device synchronisation of its flush, and the call returns true:
  // resource_memory_manager's memalloc blocks do (freed to the resource as a flush frees them,
  // unless a defer_cleanup() guard is alive). Otherwise it is that plain assignment (other owners
  // keep the memory; the last one's finalizer runs as usual, a deferred free queued) and returns
  // false. Freeing memory that work still uses is the caller's error, as with any free.
  bool release_idle() noexcept;

 protected:
  memory_pointer(context* ctx, int device, void* ptr, std::size_t size, std::size_t offset,
                 std::shared_ptr<detail::allocation_owner> owner) noexcept
      : ctx_(ctx),
        device_(device),
        ptr_(ptr),
        size_(size),
        offset_(offset),
        owner_(std::move(owner)) {}
  std::shared_ptr<detail::allocation_owner> const& owner() const noexcept { return owner_; }

 private:
  context* ctx_ = nullptr;
  int device_ = -1;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
  std::shared_ptr<detail::allocation_owner> owner_;
};

// Same ownership as memory_pointer (see the file comment); the spec's AutoFreePointer.
class auto_free_pointer : public memory_pointer {
 public:
  using memory_pointer::memory_pointer;
};

// Pinned host memory mapped into the device address space: host_pointer() for the host,
// device_pointer() for kernels (equal under unified addressing, but not assumed to be).
class mapped_memory : public auto_free_pointer {
 public:
  mapped_memory() = default;
  mapped_memory(context& ctx, void* host_ptr, void* device_ptr, std::size_t size,
                std::function<void()> finalizer = {});
  mapped_memory(mapped_memory const&) = default;
  mapped_memory& operator=(mapped_memory const&) = default;
  // A moved-from one is empty, host_pointer() null too (as memory_pointer's moves).
  mapped_memory(mapped_memory&& other) noexcept
      : auto_free_pointer(static_cast<auto_free_pointer&&>(other)),
        host_ptr_(std::exchange(other.host_ptr_, nullptr)) {}
  mapped_memory& operator=(mapped_memory&& other) noexcept {
    if (this != &other) {
      host_ptr_ = std::exchange(other.host_ptr_, nullptr);
      auto_free_pointer::operator=(static_cast<auto_free_pointer&&>(other));
    }
    return *this;
  }
  ~mapped_memory() = default;
  void* host_pointer() const noexcept { return host_ptr_; }

 private:
  void* host_ptr_ = nullptr;
};

// Managed (unified) memory: the same address is valid on the host and on the device.
class managed_memory : public memory_pointer {
 public:
  managed_memory() = default;
  managed_memory(context& ctx, void* ptr, std::size_t size, std::function<void()> finalizer = {});
  void* host_pointer() const noexcept { return device_pointer(); }
};

// Pinned host memory that is not mapped into the device address space. `owner` (mempin) is kept
// alive until the finalizer has run, so the pinned range stays valid as long as it is pinned;
// memhostalloc passes no owner.
class pinned_memory {
 public:
  pinned_memory() = default;
  pinned_memory(context& ctx, void* host_ptr, std::size_t size,
                std::function<void()> finalizer = {}, std::shared_ptr<void> owner = {});
  pinned_memory(pinned_memory const&) = default;
  pinned_memory& operator=(pinned_memory const&) = default;
  // A moved-from one is empty as a default-constructed one (as memory_pointer's moves).
  pinned_memory(pinned_memory&& other) noexcept
      : ctx_(std::exchange(other.ctx_, nullptr)),
        host_ptr_(std::exchange(other.host_ptr_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        owner_(std::move(other.owner_)) {}
  pinned_memory& operator=(pinned_memory&& other) noexcept {
    if (this != &other) {
      ctx_ = std::exchange(other.ctx_, nullptr);
      host_ptr_ = std::exchange(other.host_ptr_, nullptr);
      size_ = std::exchange(other.size_, 0);
      owner_ = std::move(other.owner_);  // last: may run the previous owner's finalizer
    }
    return *this;
  }
  ~pinned_memory() = default;

  void* host_pointer() const noexcept { return host_ptr_; }
  std::size_t size() const noexcept { return size_; }
  long use_count() const noexcept { return owner_ ? owner_.use_count() : 0; }
  // The foreign owner passed to mempin (null for memhostalloc).
  std::shared_ptr<void> const& owner() const noexcept;
  context& owning_context() const;
  explicit operator bool() const noexcept { return owner_ != nullptr; }

 private:
  context* ctx_ = nullptr;
  void* host_ptr_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<detail::allocation_owner> owner_;
};

}  // namespace gpumem
