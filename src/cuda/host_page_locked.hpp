// Internal to the host backend: page-locked host memory, as CUDA keeps it. Pinned memory
// (allocate_pinned, cudaHostAlloc) is whole pages of the host's heap; registered memory
// (register_host, cudaHostRegister) is a range of the caller's. Both are tables of host ranges,
// so that mapped_device_pointer finds the range holding an address and register_host refuses a
// range sharing a page with a registered or pinned one, wherever it starts, as CUDA does (checked
// on an H200: cudaErrorHostMemoryAlreadyRegistered for a registered page, cudaErrorInvalidValue
// for a pinned one). Pages are the host's (sysconf(_SC_PAGESIZE)), as the arena's.
//
// Thread safety: every member may be called from any thread (one mutex).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <map>
#include <mutex>

namespace gpumem::detail::host {

class page_locked_memory {
 public:
  page_locked_memory() = default;
  page_locked_memory(page_locked_memory const&) = delete;
  page_locked_memory& operator=(page_locked_memory const&) = delete;
  ~page_locked_memory();  // frees the pinned memory still allocated

  // Whole pages (out_of_memory when the size cannot have them); `mapped` as the flags say.
  void* allocate_pinned(std::size_t bytes, host_alloc_flags flags);
  void deallocate_pinned(void* ptr);  // cuda_error if `ptr` is not from allocate_pinned
  // cuda_error unless [ptr, ptr + bytes) is a range register_host may be given: not null, not
  // empty, not wrapping the address space.
  static void check_range(void* ptr, std::size_t bytes);
  // check_range first; `ptr` must not be device memory (the caller checks that between the two:
  // this class knows no device memory).
  void register_host(void* ptr, std::size_t bytes, bool mapped);
  void unregister_host(void* ptr);
  // `host_ptr` itself (unified addressing) when a mapped range holds it, else cuda_error.
  void* mapped_device_pointer(void* host_ptr) const;

  // The host's page size.
  static std::size_t page_size() noexcept;

 private:
  struct host_range {
    std::size_t size;
    bool mapped;
  };
  using table = std::map<void*, host_range>;

  // Whether [ptr, ptr + bytes) shares a byte with a range of `ranges` (which do not overlap one
  // another). Ranges that only share a page do not overlap: CUDA registers both (an H100, driver
  // 580). Caller holds mutex_; the range does not wrap (register_host checked).
  static bool overlaps(table const& ranges, void* ptr, std::size_t bytes);
  // The range of either table holding `ptr`, if any. Caller holds mutex_.
  host_range const* find(void const* ptr) const;

  mutable std::mutex mutex_;
  table pinned_;
  table registered_;
};

}  // namespace gpumem::detail::host
