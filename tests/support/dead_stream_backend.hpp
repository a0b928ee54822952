// A forwarding_backend that remembers the streams destroyed through it and refuses, and counts,
// every later call that names one: on CUDA any use of a destroyed stream's handle is undefined (on
// an H100 or H200 with driver 580 it kills the process), so a component that must survive streams
// destroyed behind its back must make none. A refused call throws cuda_error and never reaches
// the inner backend, so the test runs the same on both backends.
//
//   dead_stream_backend strict(backend());
//   stream_handle s = strict.create_stream(true);
//   ...                                    // use s through something that takes &strict
//   strict.destroy_stream(s);
//   ...                                    // keep using that something
//   EXPECT_EQ(strict.dead_uses(), 0u) << strict.first_dead_use();
//
// A stream created later at the same address is alive again. Thread-safe.
#pragma once

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include "forwarding_backend.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace gpumem::test {

class dead_stream_backend : public forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;

  std::size_t dead_uses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dead_uses_;
  }
  std::string first_dead_use() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

  stream_handle create_stream(bool non_blocking) override {
    stream_handle const s = inner_.create_stream(non_blocking);
    std::lock_guard<std::mutex> lock(mutex_);
    dead_.erase(s);
    return s;
  }
  void destroy_stream(stream_handle stream) override {
    check(stream, "destroy_stream");
    inner_.destroy_stream(stream);
    std::lock_guard<std::mutex> lock(mutex_);
    dead_.insert(stream);
  }
  void* allocate_async(std::size_t bytes, stream_handle stream) override {
    check(stream, "allocate_async");
    return inner_.allocate_async(bytes, stream);
  }
  void deallocate_async(void* ptr, stream_handle stream) override {
    check(stream, "deallocate_async");
    inner_.deallocate_async(ptr, stream);
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) override {
    check(stream, "copy_async");
    inner_.copy_async(dst, src, bytes, stream);
  }
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    check(stream, "fill_async");
    inner_.fill_async(dst, value, bytes, stream);
  }
  void synchronize_stream(stream_handle stream) override {
    check(stream, "synchronize_stream");
    inner_.synchronize_stream(stream);
  }
  bool query_stream(stream_handle stream) override {
    check(stream, "query_stream");
    return inner_.query_stream(stream);
  }
  std::uint64_t stream_id(stream_handle stream) override {
    check(stream, "stream_id");
    return inner_.stream_id(stream);
  }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    check(stream, "enqueue_host_function");
    inner_.enqueue_host_function(stream, std::move(fn));
  }
  bool stream_is_capturing(stream_handle stream) override {
    check(stream, "stream_is_capturing");
    return inner_.stream_is_capturing(stream);
  }
  void record_event(event_handle event, stream_handle stream) override {
    check(stream, "record_event");
    inner_.record_event(event, stream);
  }
  void stream_wait_event(stream_handle stream, event_handle event) override {
    check(stream, "stream_wait_event");
    inner_.stream_wait_event(stream, event);
  }

 private:
  void check(stream_handle stream, char const* call) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_.count(stream) == 0) return;
    if (dead_uses_++ == 0) first_ = call;
    throw cuda_error(400, "cudaErrorInvalidResourceHandle", call, __FILE__, __LINE__,
                     "a destroyed stream's handle");
  }

  mutable std::mutex mutex_;
  std::set<stream_handle> dead_;
  std::size_t dead_uses_ = 0;
  std::string first_;
};

}  // namespace gpumem::test
