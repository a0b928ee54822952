// gpumem/mr/cuda_resource.hpp
//
// The plainest upstream: every allocation is one device allocation of the primitive layer
// (cudaMalloc / cudaFree on the cuda backend, the simulated arena on the host backend).
#pragma once

#include <gpumem/mr/memory_resource.hpp>

namespace gpumem {

// Device memory straight from the backend, no caching.
//
// Ownership: holds nothing but a reference to the backend chosen at construction (the process-wide
// gpumem::backend() unless one is given); the backend must outlive the resource.
// Thread safety: every member may be called from any thread (the backend is thread safe).
// Stream semantics: allocation is immediate and usable on every stream. deallocate waits for the
// freeing stream before returning the memory, so work enqueued on that stream before the free
// never sees the memory reused (cudaFree synchronises anyway; the host backend frees at once, so
// the wait makes both backends keep the contract).
class cuda_resource final : public memory_resource {
 public:
  explicit cuda_resource(device_backend* backend = nullptr);

  std::string name() const override { return "cuda_resource"; }
  memory_info get_memory_info() const override;
  device_backend& owning_backend() const noexcept { return *backend_; }
  device_backend* backend_in_use() const noexcept override { return backend_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  bool do_is_equal(memory_resource const& other) const noexcept override;

  device_backend* backend_;
};

}  // namespace gpumem
