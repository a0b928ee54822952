// Internal to both backends: the virtual-memory calls of device_backend (reserve / create physical
// / map / unmap), split into what differs between the backends and what does not.
//
//   * vmm_operations — the unchecked operations of one backend: the CUDA driver's VMM API
//     (cuda_vmm.cpp) or mmap over the host arena's memfd (host_vmm.cpp). They trust their input.
//   * vmm_registry — the bookkeeping both backends share: it checks every argument against the
//     reservations, chunks and mappings it has recorded, calls the operations, and records the
//     result. So both backends reject the same bad input with the same gpumem::logic_error, even
//     where the driver would accept it (cuMemRelease of a chunk that is still mapped is legal in
//     CUDA and frees it at the last unmap; here it is an error, so that a pool cannot lose track of
//     memory it still maps) or would report it only as an unspecific CUDA_ERROR_INVALID_VALUE.
//
// Physical handles are the registry's own numbers (1, 2, ...; never reused), mapped to the
// operations' native values, so a stale or forged handle is always "unknown", never another chunk.
//
// Thread safety: every registry member may be called from any thread. One mutex guards the tables
// and is held across the native operation of each call, so check, operation and record are one
// step (two threads cannot map the same range, or release a chunk while another maps it). Growth
// of a pool is rare and each native call is short, so the serialisation costs nothing that matters.
// Lock order: the registry's mutex, then whatever the operations lock (the host arena's mutex).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace gpumem::detail {

class vmm_operations {
 public:
  virtual ~vmm_operations() = default;
  // The granularity on the current device; 0 when virtual memory is not supported there.
  virtual std::size_t granularity() = 0;
  virtual void* reserve(std::size_t bytes) = 0;  // aligned to granularity()
  virtual void free_range(void* base, std::size_t bytes) = 0;
  // Throws gpumem::out_of_memory when the device has too little. Returns the native handle.
  virtual std::uint64_t create(std::size_t bytes) = 0;
  virtual void release(std::uint64_t native, std::size_t bytes) = 0;
  virtual void map(void* address, std::size_t bytes, std::uint64_t native) = 0;
  virtual void unmap(void* address, std::size_t bytes) = 0;
};

class vmm_registry {
 public:
  explicit vmm_registry(std::unique_ptr<vmm_operations> operations);
  ~vmm_registry();
  vmm_registry(vmm_registry const&) = delete;
  vmm_registry& operator=(vmm_registry const&) = delete;

  // device_backend's calls, with the same contracts (device_backend.hpp).
  std::size_t granularity();
  void* reserve_address_range(std::size_t bytes);
  void release_address_range(void* base, std::size_t bytes);
  physical_handle create_physical(std::size_t bytes);
  void release_physical(physical_handle chunk);
  void map_physical(void* address, std::size_t bytes, physical_handle chunk);
  void unmap(void* address, std::size_t bytes);

  // Unmaps every mapping, frees every reservation and releases every chunk, ignoring failures.
  // For a backend's destructor where the operations still work then (the host backend); the cuda
  // backend leaves this to the driver's teardown, as it does for cudaMalloc'd memory.
  void release_all() noexcept;

 private:
  struct mapping {
    std::size_t size;
    physical_handle chunk;
  };
  struct reservation {
    std::size_t size;
    std::map<std::uintptr_t, mapping> mappings;  // address -> mapping, inside the reservation
  };
  struct chunk_record {
    std::uint64_t native;
    std::size_t size;
    std::size_t mapped = 0;  // number of live mappings of this chunk
  };

  // Caller holds mutex_. Each returns the granularity or throws.
  std::size_t supported_granularity(char const* call);
  std::size_t checked_size(std::size_t bytes, char const* call);
  chunk_record& known_chunk(physical_handle chunk, char const* call);
  // The reservation that holds all of [address, address + bytes), or throws.
  reservation& reservation_holding(std::uintptr_t address, std::size_t bytes, char const* call);

  std::unique_ptr<vmm_operations> operations_;
  std::mutex mutex_;
  std::map<std::uintptr_t, reservation> reservations_;  // base -> reservation
  std::unordered_map<std::uint64_t, chunk_record> chunks_;
  std::uint64_t next_handle_ = 1;
};

// The base of both backends: device_backend's virtual-memory calls, forwarded to the backend's
// registry (which each backend owns, as its operations need the backend's own state).
class vmm_backend : public device_backend {
 public:
  std::size_t vmm_granularity() override { return vmm().granularity(); }
  void* reserve_address_range(std::size_t bytes) override {
    return vmm().reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) override {
    vmm().release_address_range(base, bytes);
  }
  physical_handle create_physical(std::size_t bytes) override {
    return vmm().create_physical(bytes);
  }
  void release_physical(physical_handle chunk) override { vmm().release_physical(chunk); }
  void map_physical(void* address, std::size_t bytes, physical_handle chunk) override {
    vmm().map_physical(address, bytes, chunk);
  }
  void unmap(void* address, std::size_t bytes) override { vmm().unmap(address, bytes); }

 protected:
  virtual vmm_registry& vmm() noexcept = 0;
};

}  // namespace gpumem::detail
