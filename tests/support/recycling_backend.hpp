// A forwarding_backend that plays CUDA's reuse of stream handles without undefined behaviour, for
// the tests of everything keyed by device_backend::stream_id (the pool's per-stream state, the
// managers' release_stream).
//
//   recycling_backend device(inner);
//   stream_handle s = device.create_stream(true);
//   ...                                  // state keyed by s
//   device.recycle(s);                   // s is gone; a new stream has its address
//
// recycle(s) makes the live handle `s` name a "new" stream from then on: stream_id(s) returns a
// fresh id (counted from 2^62, far from the host backend's own ids), as if s had been destroyed
// with work pending and the next cudaStreamCreate had returned the same address. Derive from it to
// change more calls. Thread-safe: stream_id and recycle take a lock.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include "forwarding_backend.hpp"

#include <cstdint>
#include <map>
#include <mutex>

namespace gpumem::test {

class recycling_backend : public forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  std::uint64_t stream_id(stream_handle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = renamed_.find(stream);
    return it == renamed_.end() ? inner_.stream_id(stream) : it->second;
  }
  void recycle(stream_handle stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    renamed_[stream] = next_id_++;
  }

 private:
  std::mutex mutex_;
  std::map<stream_handle, std::uint64_t> renamed_;
  std::uint64_t next_id_ = std::uint64_t{1} << 62;
};

}  // namespace gpumem::test
