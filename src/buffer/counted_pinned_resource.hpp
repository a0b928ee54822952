// The upstream of a spill manager's host pool: pinned host memory (pinned_host_resource), with the
// bytes, the calls and the seconds of each allocation counted, so that the statistics can say how
// much of a spill's time went to pinning (a growth of the pool) rather than to copying.
//
// Thread safety: as pinned_host_resource; the counters are atomics.
#pragma once

#include <gpumem/mr/memory_resource.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpumem::detail {

class counted_pinned_resource final : public memory_resource {
 public:
  counted_pinned_resource() : pinned_(host_alloc_flags{true, true, false}) {}

  std::string name() const override { return "pinned_host_resource"; }
  resource_properties properties() const noexcept override { return pinned_.properties(); }
  bool selects_own_device() const noexcept override { return pinned_.selects_own_device(); }
  int own_device() const noexcept override { return pinned_.own_device(); }

  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  std::size_t calls() const noexcept { return calls_.load(std::memory_order_relaxed); }
  double seconds() const noexcept {
    return static_cast<double>(nanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
  }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    auto const start = std::chrono::steady_clock::now();
    void* const ptr = pinned_.allocate(bytes, stream);
    auto const took = std::chrono::steady_clock::now() - start;
    nanoseconds_.fetch_add(static_cast<std::uint64_t>(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
                           std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    return ptr;
  }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override {
    pinned_.deallocate(ptr, bytes, stream);
  }

  pinned_host_resource pinned_;
  std::atomic<std::size_t> bytes_{0};
  std::atomic<std::size_t> calls_{0};
  std::atomic<std::uint64_t> nanoseconds_{0};
};

}  // namespace gpumem::detail
