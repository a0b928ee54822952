// Test support: a host device that counts every call gpumem makes on device memory, streams and
// events once `dead` is set (a CUDA context reset under gpumem, whose objects must not be touched
// again).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include "recycling_backend.hpp"
#include "scoped_backend.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace gpumem::test {

// A host device that counts every call gpumem makes on device memory, streams and events once
// `dead` is set: a CUDA context reset under gpumem, whose objects must not be touched again.
class dead_context_backend final : public recycling_backend {
 public:
  using recycling_backend::recycling_backend;
  void deallocate(void* ptr) override {
    touch();
    inner_.deallocate(ptr);
  }
  void destroy_event(event_handle event) override {
    touch();
    inner_.destroy_event(event);
  }
  void destroy_stream(stream_handle stream) override {
    touch();
    inner_.destroy_stream(stream);
  }
  void record_event(event_handle event, stream_handle stream) override {
    touch();
    inner_.record_event(event, stream);
  }
  bool query_event(event_handle event) override {
    touch();
    return inner_.query_event(event);
  }
  bool query_stream(stream_handle stream) override {
    touch();
    return inner_.query_stream(stream);
  }
  void synchronize_stream(stream_handle stream) override {
    touch();
    inner_.synchronize_stream(stream);
  }
  void synchronize() override {
    touch();
    inner_.synchronize();
  }
  std::uint64_t stream_id(stream_handle stream) override {
    touch();
    return recycling_backend::stream_id(stream);
  }
  std::atomic<bool> dead{false};
  std::atomic<int> calls_after_death{0};

 private:
  void touch() {
    if (dead.load()) calls_after_death.fetch_add(1);
  }
};

struct dead_context_device {
  explicit dead_context_device(std::size_t capacity)
      : inner(make_host_backend(host_backend_options{capacity})),
        counter(new dead_context_backend(*inner)),
        installed(std::unique_ptr<device_backend>(counter)) {}
  std::unique_ptr<device_backend> inner;
  dead_context_backend* counter;  // owned by `installed`
  test::scoped_backend installed;
};

}  // namespace gpumem::test
