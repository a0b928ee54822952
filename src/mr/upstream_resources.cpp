// The upstream resources over the primitive layer: cuda_resource, async_resource, managed_resource,
// pinned_host_resource. Each is a thin forwarder; the only policy here is that the non-stream-
// ordered frees wait for the freeing stream first (see the class comments).
#include "resource_support.hpp"

#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/managed_resource.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>

namespace gpumem {

namespace {
device_backend* chosen(device_backend* given) {
  return given != nullptr ? given : &backend();
}
}  // namespace

// --- cuda_resource
// --------------------------------------------------------------------------------

cuda_resource::cuda_resource(device_backend* backend) : backend_(chosen(backend)) {}

memory_info cuda_resource::get_memory_info() const {
  return backend_->get_memory_info();
}

void* cuda_resource::do_allocate(std::size_t bytes, stream_handle) {
  if (bytes == 0) return nullptr;
  return backend_->allocate(bytes);
}

void cuda_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  try {
    backend_->synchronize_stream(stream);
    backend_->deallocate(ptr);
  } catch (...) {
    detail::report_deallocate_failure(name(), ptr, bytes);
  }
}

bool cuda_resource::do_is_equal(memory_resource const& other) const noexcept {
  auto const* o = dynamic_cast<cuda_resource const*>(&other);
  return o != nullptr && o->backend_ == backend_;
}

// --- async_resource
// -------------------------------------------------------------------------------

async_resource::async_resource(async_resource_options options, device_backend* backend)
    : backend_(chosen(backend)) {
  if (options.release_threshold) backend_->set_async_release_threshold(*options.release_threshold);
}

memory_info async_resource::get_memory_info() const {
  return backend_->get_memory_info();
}

void async_resource::trim(std::size_t keep_bytes) {
  backend_->trim_async_pool(keep_bytes);
}

void* async_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  if (bytes == 0) return nullptr;
  return backend_->allocate_async(bytes, stream);
}

void async_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  try {
    backend_->deallocate_async(ptr, stream);
  } catch (...) {
    detail::report_deallocate_failure(name(), ptr, bytes);
  }
}

bool async_resource::do_is_equal(memory_resource const& other) const noexcept {
  auto const* o = dynamic_cast<async_resource const*>(&other);
  return o != nullptr && o->backend_ == backend_;
}

// --- managed_resource
// -----------------------------------------------------------------------------

managed_resource::managed_resource(managed_resource_options options, device_backend* backend)
    : options_(options), backend_(chosen(backend)) {}

memory_info managed_resource::get_memory_info() const {
  return backend_->get_memory_info();
}

void* managed_resource::do_allocate(std::size_t bytes, stream_handle) {
  if (bytes == 0) return nullptr;
  return backend_->allocate_managed(bytes, options_.attach_global);
}

void managed_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  try {
    backend_->synchronize_stream(stream);
    backend_->deallocate_managed(ptr);
  } catch (...) {
    detail::report_deallocate_failure(name(), ptr, bytes);
  }
}

bool managed_resource::do_is_equal(memory_resource const& other) const noexcept {
  auto const* o = dynamic_cast<managed_resource const*>(&other);
  return o != nullptr && o->backend_ == backend_ &&
         o->options_.attach_global == options_.attach_global;
}

// --- pinned_host_resource
// -------------------------------------------------------------------------

pinned_host_resource::pinned_host_resource(host_alloc_flags flags, device_backend* backend)
    : flags_(flags), backend_(chosen(backend)) {}

void* pinned_host_resource::do_allocate(std::size_t bytes, stream_handle) {
  if (bytes == 0) return nullptr;
  return backend_->allocate_pinned(bytes, flags_);
}

void pinned_host_resource::do_deallocate(void* ptr, std::size_t bytes,
                                         stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  try {
    backend_->synchronize_stream(stream);
    backend_->deallocate_pinned(ptr);
  } catch (...) {
    detail::report_deallocate_failure(name(), ptr, bytes);
  }
}

bool pinned_host_resource::do_is_equal(memory_resource const& other) const noexcept {
  auto const* o = dynamic_cast<pinned_host_resource const*>(&other);
  return o != nullptr && o->backend_ == backend_ && o->flags_.mapped == flags_.mapped &&
         o->flags_.portable == flags_.portable && o->flags_.write_combined == flags_.write_combined;
}

}  // namespace gpumem
