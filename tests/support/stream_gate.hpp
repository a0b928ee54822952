// Holds a stream at a point of its order until open(): `block(stream)` enqueues a host function
// that waits for the gate, so work enqueued after it has certainly not run while the gate is
// closed — on both backends, with no timing involved. Open it before synchronising the stream; the
// destructor opens it too, so a failed assertion cannot leave a stream blocked.
//
// On the cuda backend host functions of all streams may share one runtime thread: while a gate is
// closed, do not wait for a host function enqueued on another stream.
//
// compute-sanitizer runs the device's work one piece at a time: a test that waits for one stream,
// or lets a thread exit, while another stream is held back by a gate cannot finish under it.
// scripts/gpu-check.sh sets GPUMEM_UNDER_SANITIZER for its sanitizer runs, and such tests begin
// with GPUMEM_SKIP_WHILE_GATES_SERIALISE() (they run natively in the same script).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#define GPUMEM_SKIP_WHILE_GATES_SERIALISE()                                                 \
  do {                                                                                      \
    if (::gpumem::backend().kind() == ::gpumem::backend_kind::cuda &&                       \
        std::getenv("GPUMEM_UNDER_SANITIZER") != nullptr)                                   \
      GTEST_SKIP() << "holds a stream back while other work must go on: compute-sanitizer " \
                      "serialises the device's work (GPUMEM_UNDER_SANITIZER)";              \
  } while (false)

namespace gpumem::test {

class stream_gate {
 public:
  stream_gate() : open_(std::make_shared<std::atomic<bool>>(false)) {}
  ~stream_gate() { open(); }
  stream_gate(stream_gate const&) = delete;
  stream_gate& operator=(stream_gate const&) = delete;

  void block(stream_handle stream) {
    backend().enqueue_host_function(stream, [flag = open_] {
      while (!flag->load(std::memory_order_acquire))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  }
  void open() { open_->store(true, std::memory_order_release); }

 private:
  std::shared_ptr<std::atomic<bool>> open_;
};

}  // namespace gpumem::test
