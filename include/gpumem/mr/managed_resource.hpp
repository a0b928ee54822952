// gpumem/mr/managed_resource.hpp
//
// Unified (managed) memory: one address valid on the host and on the device (cudaMallocManaged).
#pragma once

#include <gpumem/mr/memory_resource.hpp>

namespace gpumem {

struct managed_resource_options {
  // cudaMemAttachGlobal when true (any stream may touch the memory), cudaMemAttachHost otherwise.
  bool attach_global = true;
};

// Managed memory from the backend, no caching.
//
// Ownership: each allocation is one managed allocation; the backend (process-wide unless given)
// must outlive the resource.
// Thread safety: every member may be called from any thread.
// Stream semantics: allocation is immediate; deallocate waits for the freeing stream before
// releasing the memory (cudaFree of managed memory is not stream-ordered).
class managed_resource final : public memory_resource {
 public:
  explicit managed_resource(managed_resource_options options = {},
                            device_backend* backend = nullptr);

  std::string name() const override { return "managed_resource"; }
  memory_info get_memory_info() const override;
  resource_properties properties() const noexcept override { return {true, true}; }
  device_backend* backend_in_use() const noexcept override { return backend_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  bool do_is_equal(memory_resource const& other) const noexcept override;

  managed_resource_options options_;
  device_backend* backend_;
};

}  // namespace gpumem
