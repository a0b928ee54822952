// gpumem/mr/statistics_adaptor.hpp
//
// Counts what passes through: current, peak and total bytes and allocations.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <atomic>
#include <cstdint>

namespace gpumem {

// One counter: the value now, the highest it has been, and the sum of every increase (which
// saturates at INT64_MAX rather than wrapping).
struct resource_counter {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t total = 0;
};

struct resource_statistics {
  resource_counter bytes;
  resource_counter allocations;
};

// Adaptor: forwards to `upstream` and keeps statistics of the requested sizes (not what the
// upstream rounds them to). A failed allocation counts nothing.
//
// Ownership: references `upstream`, which must outlive the adaptor.
// Thread safety: thread safe; counters are lock-free atomics, so a snapshot taken while other
// threads allocate is consistent per field, not across fields. The upstream's own thread safety
// applies to the forwarded calls.
// Stream semantics: those of the upstream; a deallocation counts when it is called, not when the
// stream reaches it.
class statistics_adaptor final : public memory_resource {
 public:
  explicit statistics_adaptor(memory_resource& upstream) noexcept : upstream_(&upstream) {}

  memory_resource& upstream() const noexcept { return *upstream_; }
  resource_statistics statistics() const noexcept;
  resource_counter bytes() const noexcept { return statistics().bytes; }
  resource_counter allocations() const noexcept { return statistics().allocations; }
  // Peaks become the current values and totals zero: for measuring one phase of a program.
  void reset_peaks_and_totals() noexcept;

  std::string name() const override { return "statistics_adaptor over " + upstream_->name(); }
  memory_info get_memory_info() const override { return upstream_->get_memory_info(); }
  resource_properties properties() const noexcept override { return upstream_->properties(); }
  bool selects_own_device() const noexcept override { return upstream_->selects_own_device(); }
  int own_device() const noexcept override { return upstream_->own_device(); }
  device_backend* backend_in_use() const noexcept override { return upstream_->backend_in_use(); }

 private:
  struct atomic_counter {
    std::atomic<std::int64_t> current{0};
    std::atomic<std::int64_t> peak{0};
    std::atomic<std::int64_t> total{0};
    void add(std::int64_t amount) noexcept;
    void subtract(std::int64_t amount) noexcept;
    resource_counter load() const noexcept;
    void reset() noexcept;
  };

  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;

  memory_resource* upstream_;
  atomic_counter bytes_;
  atomic_counter allocations_;
};

}  // namespace gpumem
