// A device_backend that forwards every call to another one, for tests that change a few calls
// (claim completion, count or refuse calls, simulate devices).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gpumem::test {

// Forwards every call to another backend: derive and override what a test needs to change.
class forwarding_backend : public device_backend {
 public:
  explicit forwarding_backend(device_backend& inner) : inner_(inner) {}
  backend_kind kind() const noexcept override { return inner_.kind(); }
  std::string description() override { return inner_.description(); }
  int device_count() override { return inner_.device_count(); }
  int current_device() override { return inner_.current_device(); }
  void set_current_device(int ordinal) override { inner_.set_current_device(ordinal); }
  device_identity identity(int ordinal) override { return inner_.identity(ordinal); }
  memory_info get_memory_info() override { return inner_.get_memory_info(); }
  void synchronize() override { inner_.synchronize(); }
  void* allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr) override { inner_.deallocate(ptr); }
  void* allocate_async(std::size_t bytes, stream_handle stream) override {
    return inner_.allocate_async(bytes, stream);
  }
  void deallocate_async(void* ptr, stream_handle stream) override {
    inner_.deallocate_async(ptr, stream);
  }
  std::size_t set_async_release_threshold(std::size_t bytes) override {
    return inner_.set_async_release_threshold(bytes);
  }
  void trim_async_pool(std::size_t keep_bytes) override { inner_.trim_async_pool(keep_bytes); }
  void* allocate_managed(std::size_t bytes, bool attach_global) override {
    return inner_.allocate_managed(bytes, attach_global);
  }
  void deallocate_managed(void* ptr) override { inner_.deallocate_managed(ptr); }
  void* allocate_pinned(std::size_t bytes, host_alloc_flags flags) override {
    return inner_.allocate_pinned(bytes, flags);
  }
  void deallocate_pinned(void* ptr) override { inner_.deallocate_pinned(ptr); }
  void register_host(void* ptr, std::size_t bytes, bool mapped, bool portable) override {
    inner_.register_host(ptr, bytes, mapped, portable);
  }
  void unregister_host(void* ptr) override { inner_.unregister_host(ptr); }
  void* mapped_device_pointer(void* host_ptr) override {
    return inner_.mapped_device_pointer(host_ptr);
  }
  void copy(void* dst, void const* src, std::size_t bytes) override {
    inner_.copy(dst, src, bytes);
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) override {
    inner_.copy_async(dst, src, bytes, stream);
  }
  void fill(void* dst, int value, std::size_t bytes) override { inner_.fill(dst, value, bytes); }
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    inner_.fill_async(dst, value, bytes, stream);
  }
  stream_handle create_stream(bool non_blocking) override {
    return inner_.create_stream(non_blocking);
  }
  void destroy_stream(stream_handle stream) override { inner_.destroy_stream(stream); }
  void synchronize_stream(stream_handle stream) override { inner_.synchronize_stream(stream); }
  bool query_stream(stream_handle stream) override { return inner_.query_stream(stream); }
  stream_handle per_thread_default_stream() override { return inner_.per_thread_default_stream(); }
  std::uint64_t stream_id(stream_handle stream) override { return inner_.stream_id(stream); }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    inner_.enqueue_host_function(stream, fn);
  }
  bool stream_is_capturing(stream_handle stream) override {
    return inner_.stream_is_capturing(stream);
  }
  event_handle create_event(bool timing) override { return inner_.create_event(timing); }
  void destroy_event(event_handle event) override { inner_.destroy_event(event); }
  void record_event(event_handle event, stream_handle stream) override {
    inner_.record_event(event, stream);
  }
  bool query_event(event_handle event) override { return inner_.query_event(event); }
  void synchronize_event(event_handle event) override { inner_.synchronize_event(event); }
  void stream_wait_event(stream_handle stream, event_handle event) override {
    inner_.stream_wait_event(stream, event);
  }
  float elapsed_ms(event_handle start, event_handle stop) override {
    return inner_.elapsed_ms(start, stop);
  }
  address_range get_address_range(void const* ptr) override {
    return inner_.get_address_range(ptr);
  }
  ipc_memory_handle ipc_get_handle(void* allocation_base) override {
    return inner_.ipc_get_handle(allocation_base);
  }
  void* ipc_open(ipc_memory_handle const& handle) override { return inner_.ipc_open(handle); }
  void ipc_close(void* ptr) override { inner_.ipc_close(ptr); }
  std::size_t vmm_granularity() override { return inner_.vmm_granularity(); }
  void* reserve_address_range(std::size_t bytes) override {
    return inner_.reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) override {
    inner_.release_address_range(base, bytes);
  }
  physical_handle create_physical(std::size_t bytes) override {
    return inner_.create_physical(bytes);
  }
  void release_physical(physical_handle chunk) override { inner_.release_physical(chunk); }
  void map_physical(void* address, std::size_t bytes, physical_handle chunk) override {
    inner_.map_physical(address, bytes, chunk);
  }
  void unmap(void* address, std::size_t bytes) override { inner_.unmap(address, bytes); }

 protected:
  device_backend& inner_;
};

}  // namespace gpumem::test
