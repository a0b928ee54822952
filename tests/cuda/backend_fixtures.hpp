// RAII holders for primitive-layer resources in the tests of tests/cuda/, so that a failing
// assertion never leaks device memory, streams or events (compute-sanitizer's leak check runs on
// the GPU suite), plus a gate that holds a stream back until the test opens it.
#pragma once

#include "stream_gate.hpp"

#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <thread>

namespace gpumem::test {

inline bool on_cuda() {
  return backend().kind() == backend_kind::cuda;
}

#define GPUMEM_SKIP_UNLESS_CUDA()                                                \
  do {                                                                           \
    if (!::gpumem::test::on_cuda())                                              \
      GTEST_SKIP() << "needs the cuda backend (this run uses the host backend)"; \
  } while (0)

class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes, device_backend& b = backend())
      : backend_(&b), bytes_(bytes), ptr_(b.allocate(bytes)) {}
  ~device_buffer() {
    try {
      backend_->deallocate(ptr_);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "deallocate failed: " << e.what();
    }
  }
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t size() const { return bytes_; }

 private:
  device_backend* backend_;
  std::size_t bytes_;
  void* ptr_;
};

class pinned_buffer {
 public:
  explicit pinned_buffer(std::size_t bytes, host_alloc_flags flags = {})
      : bytes_(bytes), ptr_(backend().allocate_pinned(bytes, flags)) {}
  ~pinned_buffer() {
    try {
      backend().deallocate_pinned(ptr_);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "deallocate_pinned failed: " << e.what();
    }
  }
  pinned_buffer(pinned_buffer const&) = delete;
  pinned_buffer& operator=(pinned_buffer const&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t size() const { return bytes_; }

 private:
  std::size_t bytes_;
  void* ptr_;
};

class scoped_stream {
 public:
  explicit scoped_stream(bool non_blocking = true)
      : handle_(backend().create_stream(non_blocking)) {}
  ~scoped_stream() {
    try {
      backend().synchronize_stream(handle_);
      backend().destroy_stream(handle_);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "stream teardown failed: " << e.what();
    }
  }
  scoped_stream(scoped_stream const&) = delete;
  scoped_stream& operator=(scoped_stream const&) = delete;
  stream_handle get() const { return handle_; }

 private:
  stream_handle handle_;
};

class scoped_event {
 public:
  explicit scoped_event(bool timing = false) : handle_(backend().create_event(timing)) {}
  ~scoped_event() {
    try {
      backend().destroy_event(handle_);
    } catch (std::exception const& e) {
      ADD_FAILURE() << "destroy_event failed: " << e.what();
    }
  }
  scoped_event(scoped_event const&) = delete;
  scoped_event& operator=(scoped_event const&) = delete;
  event_handle get() const { return handle_; }

 private:
  event_handle handle_;
};

}  // namespace gpumem::test
