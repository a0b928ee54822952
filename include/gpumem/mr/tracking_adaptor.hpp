// gpumem/mr/tracking_adaptor.hpp
//
// The debug wrapper: records the size of every live pointer, catches double
// frees, frees of unknown pointers and wrong-size frees, poisons freed memory, and reports what is
// still outstanding (leaks). GPUMEM_DEBUG_MEMORY=1 puts it around the memory managers' resources
// (debug_memory.hpp).
#pragma once

#include <gpumem/core/logging.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gpumem {

struct tracking_options {
  // Fill freed memory with `poison_byte` (stream-ordered, before the memory goes back upstream),
  // so code that reads freed memory sees an obvious pattern instead of stale data.
  bool poison_on_free = true;
  std::uint8_t poison_byte = 0xDB;
  // How many freed pointers are remembered to tell a double free from a free of a pointer this
  // adaptor never gave out.
  std::size_t remembered_frees = 4096;
  // Log the outstanding allocations (as leaks) when the adaptor is destroyed.
  bool report_leaks_on_destruction = true;
};

struct outstanding_allocation {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  stream_handle stream = nullptr;  // the stream it was allocated on
  std::uint64_t sequence = 0;      // the n-th allocation through this adaptor
};

// Adaptor: forwards to `upstream` and checks every free against what it handed out.
//
// A bad free (double, unknown pointer, wrong size) is reported with gpumem::log(error), counted,
// and NOT passed upstream: deallocate is noexcept, and handing a bad free to the upstream would
// corrupt it. A wrong-size free leaves the allocation live (it shows up as outstanding).
//
// Poisoning is stream-ordered on the freeing stream, on the upstream's backend
// (memory_resource::backend_in_use, the process-wide one when it names none): device memory is
// filled with fill_async; host-accessible memory (pinned, managed) with a memset run in stream
// order by enqueue_host_function, so the pattern lands after the work enqueued before the free.
//
// Device: as its upstream's (selects_own_device forwards it). Over an upstream that selects its
// own device (a pool), callers need not make a device current, so the adaptor poisons with the
// upstream's device current (memory_resource::own_device; where the upstream does not say, the
// device current when the adaptor was constructed), whichever the caller has, and leaves the
// caller's as it was.
//
// Ownership: references `upstream`, which must outlive the adaptor.
// Thread safety: thread safe; the pointer table is guarded by one mutex (debug tool: correctness
// over speed). The upstream call runs outside the lock.
// Stream semantics: those of the upstream.
class tracking_adaptor final : public memory_resource {
 public:
  explicit tracking_adaptor(memory_resource& upstream, tracking_options options = {});
  ~tracking_adaptor() override;

  memory_resource& upstream() const noexcept { return *upstream_; }

  std::vector<outstanding_allocation> outstanding() const;
  std::size_t outstanding_bytes() const;
  // Logs each outstanding allocation at `level` and returns how many there are.
  std::size_t report_outstanding(log_level level = log_level::warn) const;
  std::size_t double_frees() const;
  std::size_t unknown_frees() const;
  std::size_t wrong_size_frees() const;

  std::string name() const override { return "tracking_adaptor over " + upstream_->name(); }
  memory_info get_memory_info() const override { return upstream_->get_memory_info(); }
  resource_properties properties() const noexcept override { return upstream_->properties(); }
  bool selects_own_device() const noexcept override { return upstream_->selects_own_device(); }
  int own_device() const noexcept override { return upstream_->own_device(); }
  device_backend* backend_in_use() const noexcept override { return upstream_->backend_in_use(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  void poison(void* ptr, std::size_t bytes, stream_handle stream);

  memory_resource* upstream_;
  tracking_options options_;
  // The device current at construction, made current for the poisoning when the upstream selects
  // its own device (-1: it does not; the caller's current device is the upstream's).
  int device_ = -1;
  mutable std::mutex mutex_;
  std::unordered_map<void*, outstanding_allocation> live_;
  std::unordered_set<void*> recently_freed_;
  std::deque<void*> recently_freed_order_;
  std::uint64_t sequence_ = 0;
  std::size_t double_frees_ = 0;
  std::size_t unknown_frees_ = 0;
  std::size_t wrong_size_frees_ = 0;
};

}  // namespace gpumem
