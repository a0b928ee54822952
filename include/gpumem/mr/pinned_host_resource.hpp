// gpumem/mr/pinned_host_resource.hpp
//
// Page-locked host memory (cudaHostAlloc): the staging area of fast transfers and of spilling.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

namespace gpumem {

// Pinned host memory from the backend, no caching. The memory is host accessible, and device
// accessible through unified addressing (mapped allocations by default, as cudaMallocHost on every
// 64-bit platform CUDA supports).
//
// Ownership: each allocation is one pinned allocation; the backend (process-wide unless given)
// must outlive the resource.
// Thread safety: every member may be called from any thread.
// Stream semantics: allocation is immediate; deallocate waits for the freeing stream before
// releasing the memory (cudaFreeHost is not stream-ordered). get_memory_info is not supported: host
// memory is not the device's.
class pinned_host_resource final : public memory_resource {
 public:
  explicit pinned_host_resource(host_alloc_flags flags = {true, true, false},
                                device_backend* backend = nullptr);

  std::string name() const override { return "pinned_host_resource"; }
  resource_properties properties() const noexcept override { return {true, true}; }
  device_backend* backend_in_use() const noexcept override { return backend_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  bool do_is_equal(memory_resource const& other) const noexcept override;

  host_alloc_flags flags_;
  device_backend* backend_;
};

}  // namespace gpumem
