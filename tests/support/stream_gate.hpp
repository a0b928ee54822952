// Holds a stream at a point of its order until open(): `block(stream)` enqueues a host function
// that waits for the gate, so work enqueued after it has certainly not run while the gate is
// closed — on both backends, with no timing involved. Open it before synchronising the stream; the
// destructor opens it too, so a failed assertion cannot leave a stream blocked.
//
// On the cuda backend host functions of all streams may share one runtime thread: while a gate is
// closed, do not wait for a host function enqueued on another stream.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

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
