// gpumem/buffer/buffer.hpp
//
// buffer: one contiguous range of memory with an owner — the unit that columns are built from.
//
//   gpumem::buffer b(4096);                                       // device memory, uninitialised
//   auto h = gpumem::buffer::from_host(values.data(), bytes);     // host -> new device buffer
//   auto tail = h.slice(256, bytes - 256);                        // a view: same memory, no copy
//   std::vector<std::byte> back = tail.to_host();
//   void const* p = h.get_ptr(gpumem::access::read);             // say why the pointer is wanted
//
// Memory: device memory by default, pinned host or managed memory on request (buffer_memory),
// always from the current context's memory manager (memalloc, memhostalloc, memallocmanaged), so
// the manager's policy applies. A buffer may also view memory that exists already (a
// memory_pointer, host_memory, or a raw pointer with a std::shared_ptr<void> owner): the view keeps
// that owner alive until its last handle goes. Zero bytes allocate nothing (get_ptr is null).
//
// Ownership: a buffer is a handle to a shared storage record (the allocation or the foreign
// owner) plus an offset and a size. Copying the handle, and slice(), share the storage (for a
// copy-on-write buffer: until a write, see below); copy() is the deep copy. The memory is released
// when the last handle sharing the storage goes.
//
// Pointers: get_ptr(access) is the one way to the address, and callers say whether they read or
// write (a write through a const buffer is refused). For a plain buffer that is all it does. For a
// spillable or copy-on-write buffer (buffer_options; docs/buffers.md) it also brings spilled bytes
// back to the device, gives a writer its own copy when other shallow copies share the bytes, and:
//   * inside a spill_lock scope on the calling thread (spill_lock.hpp), keeps the buffer on the
//     device until the scope ends — the way code inside gpumem takes pointers;
//   * outside one, EXPOSES the buffer: the pointer may live anywhere, so the buffer is never
//     spilled again and its storage is never unshared again — its slices share it, and writes
//     through any of them go in place, as for a plain buffer, while a handle copy of it is a true
//     (deep) copy, which the third party's writes do not reach. Exposure is one-way.
// Do not keep a pointer longer than the buffer handle it came from (or the spill lock). gpumem's
// own operations (column and frame operations, strings::transform, transfers) take pointers only
// inside a spill lock of their own, so they unspill their inputs and never expose them.
//
// Copy-on-write (buffer_options::copy_on_write): every handle is a slice of its owner. Copying the
// handle, shallow_copy() and slice() make new slices that share the bytes; a write access through
// a slice while any other slice of the owner lives first copies that slice's bytes into a new
// owner (only its range), so the others keep what they saw — unless the owner is exposed: an
// exposed owner is shared by all its slices, as a plain buffer is, and copying an exposed handle
// (or shallow_copy()) copies its bytes. copy() is always deep.
//
// Transfers go through the array layer's copy routine. Without a stream they return when done;
// with one they are asynchronous on it, and the buffers involved are kept alive until the stream
// has passed the copy (stream::keep_alive); host memory passed in must stay valid until then.
//
// Errors: a size no allocation may have is gpumem::out_of_memory naming it (from the manager);
// ranges outside the buffer, ranges that wrap, and null pointers with a size are
// gpumem::logic_error naming the values.
//
// Thread safety: as std::shared_ptr. Distinct handles, even sharing storage, may be used and
// destroyed on different threads at once; one handle must not be assigned, or written through
// with get_ptr(access::write) (which may re-point a copy-on-write handle), while another thread
// uses it. Spilling and unspilling are serialised per storage by its mutex. The bytes themselves
// are not synchronised: order reads and writes with streams.
#pragma once

#include <gpumem/array/stream.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace gpumem {

class spill_manager;
class spill_lock;

// Where a buffer's memory lives. Device memory is for kernels; pinned memory is page-locked host
// memory (fast transfers, host access, no kernel access); managed memory is one address valid on
// the host and the device.
enum class buffer_memory { device, pinned, managed };
char const* to_string(buffer_memory memory) noexcept;

// Why a caller wants a buffer's pointer.
enum class access { read, write };

// How a buffer is made. The defaults give what buffer(bytes) always gave: device memory, handle
// copies that share the bytes, and spilling only where a global spill manager is set
// (GPUMEM_SPILL=on or set_global_spill_manager, spill_manager.hpp).
struct buffer_options {
  buffer_memory memory = buffer_memory::device;
  // Shallow copies (handle copies, shallow_copy, slice) share the bytes until one is written.
  bool copy_on_write = false;
  // Device memory only: the spill manager that may move the bytes to host memory and back. Null:
  // the global spill manager, if there is one for the current device.
  spill_manager* spill = nullptr;
  // false: never spillable, even with a global spill manager; copies (copy(), as_copy_on_write(),
  // column::copy) keep the opt-out. With a spill manager named in `spill`: logic_error.
  bool spillable = true;
};

namespace detail {
class buffer_storage;
}  // namespace detail

class buffer {
 public:
  // An empty device buffer (size 0, null pointer).
  buffer() noexcept;
  // `bytes` of uninitialised memory of kind `memory` from the current memory manager.
  explicit buffer(std::size_t bytes, buffer_memory memory = buffer_memory::device);
  buffer(std::size_t bytes, buffer_options const& options);

  // Copy-on-write handles register as slices of their owner; a copy of an exposed copy-on-write
  // handle copies its bytes (cuDF's rule: the third party's writes must not reach it). Other
  // copies and moves never copy bytes.
  buffer(buffer const& other);
  buffer(buffer&& other) noexcept;
  buffer& operator=(buffer const& other);
  buffer& operator=(buffer&& other) noexcept;
  ~buffer();

  // A new buffer holding a copy of [data, data + bytes). The first form returns when the copy is
  // done; the second is asynchronous on `s` (`data` must stay valid until `s` has passed it).
  static buffer from_host(void const* data, std::size_t bytes,
                          buffer_memory memory = buffer_memory::device);
  static buffer from_host(void const* data, std::size_t bytes, stream const& s,
                          buffer_memory memory = buffer_memory::device);
  static buffer from_host(void const* data, std::size_t bytes, buffer_options const& options);
  static buffer from_host(void const* data, std::size_t bytes, stream const& s,
                          buffer_options const& options);

  // Views of existing memory; each keeps its owner alive. A memory_pointer is device memory
  // unless `memory` says managed.
  static buffer view(memory_pointer memory, buffer_memory kind = buffer_memory::device);
  static buffer view(managed_memory memory);
  // Pinned host memory (mapped or not).
  static buffer view(host_memory memory);
  // [ptr, ptr + bytes) of kind `memory`, kept alive by `owner` (may be empty: then the caller
  // keeps the memory alive for as long as the buffer or a slice of it exists).
  static buffer view(void* ptr, std::size_t bytes, std::shared_ptr<void> owner,
                     buffer_memory memory);

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  buffer_memory memory() const noexcept { return memory_; }

  // The address of the first byte (null for an empty buffer). On a const buffer only read access
  // may be asked for: access::write is a logic_error. See the file comment for what it does to a
  // spillable or copy-on-write buffer; `file`/`line` name the caller in exposure statistics.
  // Unspilling or unsharing may throw out_of_memory.
  void* get_ptr(access mode, char const* file = __builtin_FILE(), int line = __builtin_LINE());
  void const* get_ptr(access mode, char const* file = __builtin_FILE(),
                      int line = __builtin_LINE()) const;

  // Exposes a spillable or copy-on-write buffer as get_ptr does outside any spill lock, even
  // inside one: its bytes stay on the device and are written in place, where every handle
  // sharing them sees them (a third party may hold the address). Returns the address. Unspilling
  // may throw out_of_memory.
  void* expose(char const* file = __builtin_FILE(), int line = __builtin_LINE());

  // Spilling state (false for buffers without a spill manager).
  bool is_spillable() const noexcept;
  bool is_spilled() const noexcept;
  // True once a pointer of a spillable or copy-on-write buffer left a spill lock's control.
  bool is_exposed() const noexcept;
  bool is_copy_on_write() const noexcept;
  // A shallow copy: the same as copying the handle (a new slice under copy-on-write).
  buffer shallow_copy() const { return *this; }
  // This buffer's bytes in a copy-on-write buffer: a shallow copy when it is copy-on-write
  // already, otherwise a deep copy into a new copy-on-write buffer of the same memory, made as
  // copy() makes its copies (below).
  buffer as_copy_on_write() const;

  // Whether get_ptr's address is a multiple of `alignment` (a power of two), without unspilling
  // or exposing the buffer: gpumem's own allocations are aligned to 256 bytes wherever their
  // bytes are, so for spillable and copy-on-write buffers the offset decides up to that.
  bool is_aligned(std::size_t alignment) const;

  // [offset, offset + bytes) of this buffer as a view sharing its storage.
  buffer slice(std::size_t offset, std::size_t bytes) const;
  // A new buffer of the same kind and options (copy-on-write, spill manager, spillable = false)
  // with a copy of the bytes (synchronous / asynchronous on `s`). A copy of a device buffer
  // without a spill manager is adopted by the global spill manager of the current device if one
  // is set now (as any device buffer made now is), unless the original opted out.
  buffer copy() const;
  buffer copy(stream const& s) const;
  // Copies the first `bytes` bytes into host memory at `dst` (synchronous / asynchronous on `s`).
  void copy_to_host(void* dst, std::size_t bytes) const;
  void copy_to_host(void* dst, std::size_t bytes, stream const& s) const;
  // All bytes in a host vector (the second form waits for `s` after enqueuing the copy).
  std::vector<std::byte> to_host() const;
  std::vector<std::byte> to_host(stream const& s) const;

  // False only for a handle that covers the whole of an allocation made for it (by the
  // constructor, from_host or copy, or a copy of such a handle); true for views of existing
  // memory and for slices that do not cover their whole storage.
  bool is_view() const noexcept;
  // True when both keep the same memory alive: one storage (a slice or copy of the other), one
  // allocation of a memory manager, or one foreign owner. Empty buffers share nothing.
  bool owns_same_memory(buffer const& other) const noexcept;
  // The storage record as an owner object, for stream::keep_alive after a kernel launch that uses
  // the buffer (null for an empty buffer).
  std::shared_ptr<void> share_owner() const noexcept;

 private:
  buffer(std::shared_ptr<detail::buffer_storage> storage, std::size_t offset, std::size_t size,
         buffer_memory memory) noexcept;
  friend class spill_manager;
  friend class spill_lock;
  static buffer allocate_from_host(void const* data, std::size_t bytes, stream const* s,
                                   buffer_options const& options);
  static buffer allocate_like(std::size_t bytes, detail::buffer_storage const& like,
                              bool copy_on_write);
  void copy_out(void* dst, std::size_t bytes, stream const* s) const;
  // A new buffer made as this one was (allocate_like), copy-on-write or not, with its bytes.
  buffer copy_on(stream const* s, bool copy_on_write) const;
  void const* address() const noexcept;
  void* tracked_ptr(access mode, char const* file, int line) const;
  // spill_lock::hold: pins the storage in `lock` without handing out a pointer.
  void hold_in(spill_lock& lock) const;
  void unshare();
  void release() noexcept;

  std::shared_ptr<detail::buffer_storage> storage_;
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
  buffer_memory memory_ = buffer_memory::device;
};

}  // namespace gpumem
