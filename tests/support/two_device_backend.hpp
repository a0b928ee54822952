// Two devices over one: a backend that forwards to a real one, reports two devices, and notes the
// device calls made while device 1 is current (the device-wide ones, and those on the null, legacy
// and per-thread handles, which name a stream of the current device). For tests that a resource or
// adaptor does its device work on its own device whichever device the caller has current.
#pragma once

#include "forwarding_backend.hpp"

#include <gpumem/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::test {

class two_device_backend final : public forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  ~two_device_backend() override { current() = 0; }  // the thread's next backend starts on 0
  int device_count() override { return 2; }
  int current_device() override { return current(); }
  void set_current_device(int ordinal) override {
    if (ordinal < 0 || ordinal > 1)
      throw logic_error("two_device_backend: no device " + std::to_string(ordinal));
    current() = ordinal;
  }
  void synchronize() override {
    note("synchronize");
    inner_.synchronize();
  }
  void* allocate(std::size_t bytes) override {
    note("allocate");
    return inner_.allocate(bytes);
  }
  void deallocate(void* ptr) override {
    note("deallocate");
    inner_.deallocate(ptr);
  }
  event_handle create_event(bool timing) override {
    note("create_event");
    return inner_.create_event(timing);
  }
  memory_info get_memory_info() override {
    note("get_memory_info");
    return inner_.get_memory_info();
  }
  stream_handle create_stream(bool non_blocking) override {
    note("create_stream");
    return inner_.create_stream(non_blocking);
  }
  physical_handle create_physical(std::size_t bytes) override {
    note("create_physical");
    return inner_.create_physical(bytes);
  }
  void map_physical(void* address, std::size_t bytes, physical_handle chunk) override {
    note("map_physical");
    inner_.map_physical(address, bytes, chunk);
  }
  void unmap(void* address, std::size_t bytes) override {
    note("unmap");
    inner_.unmap(address, bytes);
  }
  void* reserve_address_range(std::size_t bytes) override {
    note("reserve_address_range");
    return inner_.reserve_address_range(bytes);
  }
  // The null, legacy and per-thread handles name a stream of the current device: calls on them
  // must be made on the pool's device. (A created stream and an event carry their device.)
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    note_on(stream, "fill_async");
    inner_.fill_async(dst, value, bytes, stream);
  }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    note_on(stream, "enqueue_host_function");
    inner_.enqueue_host_function(stream, std::move(fn));
  }
  void record_event(event_handle event, stream_handle stream) override {
    note_on(stream, "record_event");
    inner_.record_event(event, stream);
  }
  bool query_stream(stream_handle stream) override {
    note_on(stream, "query_stream");
    return inner_.query_stream(stream);
  }
  void synchronize_stream(stream_handle stream) override {
    note_on(stream, "synchronize_stream");
    inner_.synchronize_stream(stream);
  }

  // Device calls made while device 1 was current.
  std::vector<std::string> on_wrong_device() {
    std::lock_guard<std::mutex> lock(mutex_);
    return wrong_;
  }

 private:
  static int& current() {
    thread_local int device = 0;
    return device;
  }
  void note_on(stream_handle stream, char const* call) {
    if (reinterpret_cast<std::uintptr_t>(stream) <= 2) note(call);
  }
  void note(char const* call) {
    if (current() == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    wrong_.emplace_back(call);
  }
  std::mutex mutex_;
  std::vector<std::string> wrong_;
};

}  // namespace gpumem::test
