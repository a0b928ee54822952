// Helpers shared by the mr/ tests: write and check byte patterns in memory of any resource, on
// either backend (host-accessible memory is touched directly, device memory through the backend).
#pragma once

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

namespace gpumem::test {

// Stream-ordered write of `value` into [p, p+bytes) on `stream`.
inline void fill_block(memory_resource const& mr, void* p, std::size_t bytes, std::uint8_t value,
                       stream_handle stream) {
  if (mr.properties().host_accessible) {
    backend().synchronize_stream(stream);
    std::memset(p, value, bytes);
  } else {
    backend().fill_async(p, value, bytes, stream);
  }
}

// Waits for `stream`, then returns the first offset in [p, p+bytes) that is not `value`, or
// `bytes` when all are.
inline std::size_t first_mismatch(memory_resource const& mr, void const* p, std::size_t bytes,
                                  std::uint8_t value, stream_handle stream) {
  backend().synchronize_stream(stream);
  std::vector<std::uint8_t> host(bytes);
  if (mr.properties().host_accessible) {
    std::memcpy(host.data(), p, bytes);
  } else {
    backend().copy(host.data(), p, bytes);
  }
  auto it = std::find_if(host.begin(), host.end(), [value](std::uint8_t b) { return b != value; });
  return static_cast<std::size_t>(it - host.begin());
}

// A stream created for a test and destroyed with it.
// `before_destroy` lets a resource with per-stream state forget the stream first.
class scoped_stream {
 public:
  explicit scoped_stream(std::function<void(stream_handle)> before_destroy = {})
      : stream_(backend().create_stream(true)), before_destroy_(std::move(before_destroy)) {}
  ~scoped_stream() {
    if (before_destroy_) before_destroy_(stream_);
    backend().destroy_stream(stream_);
  }
  scoped_stream(scoped_stream const&) = delete;
  scoped_stream& operator=(scoped_stream const&) = delete;
  stream_handle get() const noexcept { return stream_; }
  operator stream_handle() const noexcept { return stream_; }

 private:
  stream_handle stream_;
  std::function<void(stream_handle)> before_destroy_;
};

}  // namespace gpumem::test
