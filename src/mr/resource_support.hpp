// Private helpers of the mr/ sources: the text of pointers and streams in messages, the backend a
// resource works on, and the one way a noexcept deallocation reports a failure it must swallow.
#pragma once

#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

namespace gpumem::detail {

inline std::string pointer_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return buffer;
}

inline std::string stream_text(stream_handle stream) {
  return pointer_text(static_cast<void const*>(stream));
}

// The backend `resource` works on: its own (memory_resource::backend_in_use), else the
// process-wide one.
inline device_backend& backend_of(memory_resource const& resource) {
  device_backend* const own = resource.backend_in_use();
  return own != nullptr ? *own : backend();
}

// The device an adaptor over `upstream`, which selects its own device, does its own device work on:
// the upstream's (memory_resource::own_device), else the one current now.
inline int device_of(memory_resource const& upstream) {
  int const own = upstream.own_device();
  return own >= 0 ? own : backend_of(upstream).current_device();
}

// Called from inside a catch block of a noexcept deallocation: logs what was thrown.
inline void log_deallocate_failure(std::string const& resource, void const* ptr,
                                   std::size_t bytes) noexcept {
  try {
    std::string what = "unknown exception";
    try {
      throw;
    } catch (std::exception const& e) {
      what = e.what();
    } catch (...) {
    }
    log(log_level::error, resource + ": deallocate(" + pointer_text(ptr) + ", " +
                              std::to_string(bytes) + ") failed: " + what);
  } catch (...) {
  }
}

// Called from inside a catch block of a noexcept deallocation that freed nothing: logs what was
// thrown and reports the free as refused (the adaptors above keep counting the bytes). Not for a
// failure after which the free still goes on (tracking_adaptor's poisoning): that one only logs.
inline void report_deallocate_failure(std::string const& resource, void const* ptr,
                                      std::size_t bytes) noexcept {
  report_refused_deallocation();  // nothing was freed: the adaptors above keep counting it
  log_deallocate_failure(resource, ptr, bytes);
}

}  // namespace gpumem::detail
