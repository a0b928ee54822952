// A host device that counts the waits gpumem makes (device and stream synchronisations) and its
// questions for the current device, and can
// play a device whose context was reset (every device synchronisation fails), for the tests of
// what waits when: the managers' deferred frees, idle frees, the spill manager's batches.
//
//   test::counted_device device(256 * MiB);   // installed for the scope
//   ...
//   EXPECT_EQ(device.counter->device_synchronizations, 1);
//
// It derives from recycling_backend, so recycle(s) plays a new stream at a destroyed one's address.
#pragma once

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include "recycling_backend.hpp"
#include "scoped_backend.hpp"

#include <atomic>
#include <cstddef>
#include <memory>

namespace gpumem::test {

class counting_backend final : public recycling_backend {
 public:
  using recycling_backend::recycling_backend;
  void synchronize() override {
    device_synchronizations.fetch_add(1);
    if (dead.load())
      throw cuda_error(709, "cudaErrorContextIsDestroyed", "cudaDeviceSynchronize", __FILE__,
                       __LINE__, "the test's device was reset");
    inner_.synchronize();
  }
  void synchronize_stream(stream_handle stream) override {
    stream_synchronizations.fetch_add(1);
    inner_.synchronize_stream(stream);
  }
  int current_device() override {
    device_queries.fetch_add(1);
    return inner_.current_device();
  }
  std::atomic<int> device_synchronizations{0};
  std::atomic<int> device_queries{0};  // current_device() calls (cudaGetDevice on a GPU)
  std::atomic<int> stream_synchronizations{0};
  std::atomic<bool> dead{false};
};

// Installs a counting_backend over a private host device of `capacity` bytes for the scope.
struct counted_device {
  explicit counted_device(std::size_t capacity)
      : inner(make_host_backend(host_backend_options{capacity})),
        counter(new counting_backend(*inner)),
        installed(std::unique_ptr<device_backend>(counter)) {}
  int waits() const { return counter->device_synchronizations + counter->stream_synchronizations; }
  void reset_counts() {
    counter->device_synchronizations = 0;
    counter->stream_synchronizations = 0;
  }
  std::unique_ptr<device_backend> inner;  // outlives the scoped backend that forwards to it
  counting_backend* counter;              // owned by `installed`
  scoped_backend installed;
};

}  // namespace gpumem::test
