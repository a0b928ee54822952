// gpumem/mr/failure_callback_adaptor.hpp
//
// The out-of-memory hook: when the upstream runs out, ask someone to make room (the spill manager
// spills buffers to host, a manager flushes its deferred frees), then try again.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <functional>

namespace gpumem {

// Called with the bytes that could not be allocated and the attempt number (0 for the first
// failure). Returns true to retry the allocation, false to give up.
using allocation_failure_callback = std::function<bool(std::size_t bytes, int attempt)>;

struct failure_callback_options {
  // At most this many retries per allocation; after that the last out_of_memory propagates.
  int max_retries = 8;
};

// Adaptor: on gpumem::out_of_memory from the upstream, calls the callback and retries while it
// returns true, at most `max_retries` times. Other exceptions propagate untouched, and so does an
// exception thrown by the callback.
//
// Re-entry: while the callback runs on a thread, an allocation through this same adaptor on that
// thread (a spill that needs a staging buffer) goes to the upstream once and, if that fails,
// throws without calling the callback again — so a callback that allocates can never recurse
// without end. Other threads are not affected and may call the callback concurrently.
//
// Device: as its upstream's (selects_own_device forwards it). Over an upstream that selects its
// own device (a pool), callers need not make a device current, so the adaptor runs the callback
// with the upstream's device current (memory_resource::own_device; where the upstream does not
// say, the device current when the adaptor was constructed), and restores the caller's after it.
//
// Ownership: references `upstream`; owns the callback. Both must outlive the adaptor's use.
// Thread safety: thread safe if the callback is (it may be called from several threads at once).
// Stream semantics: those of the upstream; the retry uses the same stream.
class failure_callback_adaptor final : public memory_resource {
 public:
  failure_callback_adaptor(memory_resource& upstream, allocation_failure_callback callback,
                           failure_callback_options options = {});

  memory_resource& upstream() const noexcept { return *upstream_; }

  std::string name() const override { return "failure_callback_adaptor over " + upstream_->name(); }
  memory_info get_memory_info() const override { return upstream_->get_memory_info(); }
  resource_properties properties() const noexcept override { return upstream_->properties(); }
  bool selects_own_device() const noexcept override { return upstream_->selects_own_device(); }
  int own_device() const noexcept override { return upstream_->own_device(); }
  device_backend* backend_in_use() const noexcept override { return upstream_->backend_in_use(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override {
    upstream_->deallocate(ptr, bytes, stream);
  }

  memory_resource* upstream_;
  allocation_failure_callback callback_;
  failure_callback_options options_;
  // The device current at construction, made current around the callback when the upstream
  // selects its own device (-1: it does not; the caller's current device is the upstream's).
  int device_ = -1;
};

}  // namespace gpumem
