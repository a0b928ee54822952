// gpumem/mr/async_resource.hpp
//
// Stream-ordered device memory from the driver's pool (cudaMallocAsync / cudaFreeAsync).
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <optional>

namespace gpumem {

struct async_resource_options {
  // The pool keeps up to this many freed bytes instead of giving them back to the driver at each
  // synchronisation (cudaMemPoolAttrReleaseThreshold). Unset: leave the pool's setting alone.
  // The pool is the device's default pool, so the setting is shared by every async_resource of the
  // device (and every other cudaMallocAsync user of the process).
  std::optional<std::size_t> release_threshold;
};

// Device memory from the stream-ordered pool of the backend.
//
// Ownership: the memory belongs to the driver's pool; the resource only forwards. The backend
// (process-wide unless given) must outlive it.
// Thread safety: every member may be called from any thread.
// Stream semantics: those of cudaMallocAsync: the memory is usable by work on `stream` after the
// allocation; a free is ordered after the work enqueued on `stream` before it, and the driver
// reuses the memory on another stream only once that work has completed.
class async_resource final : public memory_resource {
 public:
  explicit async_resource(async_resource_options options = {}, device_backend* backend = nullptr);

  std::string name() const override { return "async_resource"; }
  memory_info get_memory_info() const override;
  device_backend* backend_in_use() const noexcept override { return backend_; }
  // Returns freed memory the pool holds beyond `keep_bytes` to the driver.
  void trim(std::size_t keep_bytes = 0);

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  bool do_is_equal(memory_resource const& other) const noexcept override;

  device_backend* backend_;
};

}  // namespace gpumem
