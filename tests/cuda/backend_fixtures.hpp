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

// Memory of one kind from a backend, freed (and the failure reported) when the holder goes.
// `Kind` supplies `static void* allocate(device_backend&, bytes, flags)`, `static void
// release(device_backend&, void*)` and a `name` for messages.
template <class Kind>
class backend_buffer {
 public:
  explicit backend_buffer(std::size_t bytes, typename Kind::flags flags = {},
                          device_backend& b = backend())
      : backend_(&b), bytes_(bytes), ptr_(Kind::allocate(b, bytes, flags)) {}
  ~backend_buffer() {
    try {
      Kind::release(*backend_, ptr_);
    } catch (std::exception const& e) {
      ADD_FAILURE() << Kind::name << " failed: " << e.what();
    }
  }
  backend_buffer(backend_buffer const&) = delete;
  backend_buffer& operator=(backend_buffer const&) = delete;
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

struct device_memory_kind {
  struct flags {};
  static constexpr char const* name = "deallocate";
  static void* allocate(device_backend& b, std::size_t bytes, flags) { return b.allocate(bytes); }
  static void release(device_backend& b, void* p) { b.deallocate(p); }
};

struct pinned_memory_kind {
  using flags = host_alloc_flags;
  static constexpr char const* name = "deallocate_pinned";
  static void* allocate(device_backend& b, std::size_t bytes, flags f) {
    return b.allocate_pinned(bytes, f);
  }
  static void release(device_backend& b, void* p) { b.deallocate_pinned(p); }
};

using pinned_buffer = backend_buffer<pinned_memory_kind>;

// Device memory; `device_buffer(bytes, backend)` takes memory from a private backend.
class device_buffer : public backend_buffer<device_memory_kind> {
 public:
  explicit device_buffer(std::size_t bytes, device_backend& b = backend())
      : backend_buffer(bytes, {}, b) {}
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
