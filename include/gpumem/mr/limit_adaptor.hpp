// gpumem/mr/limit_adaptor.hpp
//
// Caps the bytes live through one resource: a device limit for a library, a test's small device.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <atomic>
#include <cstddef>

namespace gpumem {

// Adaptor: an allocation that would take the live bytes (requested sizes, as the caller counts
// them) above `limit_bytes` throws gpumem::out_of_memory naming this adaptor and the limit, without
// asking the upstream. Exactly `limit_bytes` live is allowed.
//
// Ownership: references `upstream`, which must outlive the adaptor.
// Thread safety: thread safe; the limit is enforced with one atomic reservation per allocation,
// so concurrent allocations never overshoot it together.
// Stream semantics: those of the upstream. Bytes count as free again when deallocate is called:
// the limit is on what the caller holds, not on what the stream has finished with.
class limit_adaptor final : public memory_resource {
 public:
  limit_adaptor(memory_resource& upstream, std::size_t limit_bytes) noexcept
      : upstream_(&upstream), limit_(limit_bytes) {}

  memory_resource& upstream() const noexcept { return *upstream_; }
  std::size_t limit() const noexcept { return limit_; }
  std::size_t used_bytes() const noexcept { return used_.load(std::memory_order_relaxed); }
  // The most bytes live at once; a request the upstream refused never counts.
  std::size_t peak_bytes() const noexcept { return peak_.load(std::memory_order_relaxed); }

  std::string name() const override;
  // Free is what is left under the limit (or the upstream's free, if smaller); total is the limit.
  memory_info get_memory_info() const override;
  resource_properties properties() const noexcept override { return upstream_->properties(); }
  bool selects_own_device() const noexcept override { return upstream_->selects_own_device(); }
  int own_device() const noexcept override { return upstream_->own_device(); }
  device_backend* backend_in_use() const noexcept override { return upstream_->backend_in_use(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;

  memory_resource* upstream_;
  std::size_t limit_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> peak_{0};
};

}  // namespace gpumem
