// gpumem/manager/ipc_handle.hpp
//
// A CUDA IPC handle for device memory, exported by one process and opened by another (the spec's
// IpcHandle). It carries the 64 bytes of the backend's handle for the ALLOCATION (IPC works on
// allocation bases), the offset of the exported pointer inside that allocation (non-zero for a
// view or a pool sub-allocation), the exported size, the identity of the source device, and the
// id of the exporting process.
//
// Life cycle:
//   exporting process:  memory_manager::get_ipc_handle(ptr) -> handle (keeps `ptr` alive as long
//                       as the handle exists) -> serialize() -> bytes sent by any means
//   other process:      ipc_handle::deserialize(bytes) -> open(ctx) -> memory_pointer at the
//                       exported address -> close()
//
// Errors: opening in the exporting process, opening the same handle object twice (before
// close()), and malformed bytes are gpumem::logic_error. The source identity is informational:
// the handle is opened on `ctx`'s device (CUDA opens it there, with peer access where needed).
//
// Ownership: open() returns a memory_pointer; the mapping is released when the handle has been
// closed AND every pointer/view from open() is gone (close() drops the handle's own reference; an
// opened pointer that outlives close() stays valid). Thread safety: one object is used by one
// thread at a time.
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem {

class context;

class ipc_handle {
 public:
  ipc_handle() = default;
  // `base` keeps the exported memory alive in the exporting process (may be empty).
  ipc_handle(memory_pointer base, ipc_memory_handle handle, std::size_t size, std::size_t offset,
             device_identity source, std::int64_t source_process);

  ipc_memory_handle const& handle() const noexcept { return handle_; }
  std::size_t size() const noexcept { return size_; }
  // Offset of the exported pointer from the base of its allocation.
  std::size_t offset() const noexcept { return offset_; }
  device_identity const& source() const noexcept { return source_; }
  std::int64_t source_process() const noexcept { return source_process_; }
  bool is_open() const noexcept { return static_cast<bool>(opened_); }

  // A self-describing byte string (format tag, version, every field). Stable within one gpumem
  // version; not meant for storage.
  std::vector<std::uint8_t> serialize() const;
  // The inverse of serialize(). Throws gpumem::logic_error naming what is wrong with the bytes.
  static ipc_handle deserialize(std::uint8_t const* data, std::size_t bytes);
  static ipc_handle deserialize(std::vector<std::uint8_t> const& bytes) {
    return deserialize(bytes.data(), bytes.size());
  }

  // Maps the memory into this process on `ctx`'s device and returns a pointer to the exported
  // bytes (allocation base + offset, `size()` bytes).
  memory_pointer open(context& ctx);
  // Drops the handle's reference to the opened memory. Throws gpumem::logic_error when the
  // handle is not open (never opened, or closed already), as Numba's IpcHandle.close() raises.
  void close();

 private:
  memory_pointer base_;
  ipc_memory_handle handle_{};
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
  device_identity source_;
  std::int64_t source_process_ = 0;
  memory_pointer opened_;
};

}  // namespace gpumem
