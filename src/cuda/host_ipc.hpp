// Internal to the host backend: IPC handles. A handle names a range of the exporting process's
// arena (its pid, the arena's memfd and the range's offset and size: host_arena.hpp); opening it in
// another process maps those pages there through /proc/<pid>/fd/<fd>. The mappings opened are kept
// by the address handed out, so that closing and get_address_range find them (as CUDA's
// cuMemGetAddressRange sees an opened allocation).
//
// Thread safety: every member may be called from any thread (one mutex).
#pragma once

#include "host_arena.hpp"

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace gpumem::detail::host {

class host_ipc {
 public:
  host_ipc() = default;
  host_ipc(host_ipc const&) = delete;
  host_ipc& operator=(host_ipc const&) = delete;
  ~host_ipc();  // unmaps what is still open

  // The handle of `range`, an allocation of `arena` (its base and size).
  static ipc_memory_handle export_range(host_arena const& arena, address_range range);
  // Maps the range a handle of another process names; throws cuda_error for a handle that is not
  // a host backend's, this process's own, or whose range cannot be mapped.
  void* open(ipc_memory_handle const& handle);
  // Unmaps what open() returned (cuda_error if `ptr` is not that).
  void close(void* ptr);
  // The opened allocation holding `ptr`, if any.
  std::optional<address_range> find(void const* ptr) const;

 private:
  // The mmap'd region (page-aligned) and its length, and the exported allocation's size.
  struct mapping {
    void* region = nullptr;
    std::size_t length = 0;
    std::size_t size = 0;
  };
  mutable std::mutex mutex_;
  std::unordered_map<void*, mapping> mappings_;  // by the address handed out
};

}  // namespace gpumem::detail::host
