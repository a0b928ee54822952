// Internal to the host backend: the simulated device's memory.
//
// One arena of `capacity` bytes: a memfd mapped MAP_SHARED (pages are touched only when used), so
// an IPC handle can name (pid, fd, offset) and another process maps the same pages through
// /proc/<pid>/fd/<fd>. Allocation inside it is address-ordered first fit with coalescing — simple
// and exact, since it only simulates a driver. Out of memory is gpumem::out_of_memory; a bad free
// is cudaErrorInvalidValue, as CUDA reports it.
//
// Thread safety: every member may be called from any thread (one mutex).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace gpumem::detail::host {

class host_arena {
 public:
  // The name of the arena's memfd (/proc/<pid>/fd/<fd> links to "/memfd:<name> (deleted)").
  static constexpr char const* memfd_name = "gpumem-host-device";

  host_arena(std::size_t capacity, std::size_t alignment);
  ~host_arena();
  host_arena(host_arena const&) = delete;
  host_arena& operator=(host_arena const&) = delete;

  // `call` names the backend operation in messages. 0 bytes gives nullptr. `alignment` (a power of
  // two; 0 means the arena's) aligns the offset in the arena, e.g. to a page for mmap of the fd.
  void* allocate(std::size_t bytes, char const* call, std::size_t alignment = 0);
  // ptr must be the base of a live allocation that no stream-ordered free has claimed (retire).
  void free(void* ptr, char const* call);
  // A stream-ordered free: retire() claims the allocation when the free is queued (a second free
  // of it, in stream order or not, is then refused at once, as free() refuses a freed pointer),
  // free_retired() frees it when the stream reaches the free, unretire() undoes a claim whose free
  // could not be queued.
  void retire(void* ptr, char const* call);
  void free_retired(void* ptr, char const* call);
  void unretire(void* ptr) noexcept;

  // The live allocation containing `ptr`, if any.
  std::optional<address_range> find(void const* ptr) const;

  memory_info info() const;
  std::size_t capacity() const noexcept { return capacity_; }
  int fd() const noexcept { return fd_; }
  std::size_t offset_of(void const* ptr) const noexcept {
    return static_cast<std::size_t>(static_cast<std::uint8_t const*>(ptr) - base_);
  }

 private:
  std::optional<std::size_t> offset(void const* ptr) const;     // inside the arena?
  void free_locked(void* ptr, char const* call, bool retired);  // caller holds mutex_

  std::size_t alignment_;
  std::size_t capacity_ = 0;
  int fd_ = -1;
  std::uint8_t* base_ = nullptr;

  mutable std::mutex mutex_;
  std::map<std::size_t, std::size_t> free_ranges_;  // offset -> size
  std::map<std::size_t, std::size_t> live_;         // offset -> rounded size
  std::set<std::size_t> retiring_;                  // offsets of live ones a queued free claimed
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace gpumem::detail::host
