// gpumem/array/pin_scope.hpp
//
// Scopes that page-lock existing host memory for their duration (Numba's `with cuda.pinned(a):`
// and `with cuda.mapped(a) as d:`), through the current context's memory manager (mempin).
//
//   std::vector<float> big(n);
//   {
//     auto pin = gpumem::pinned(gpumem::host_span<float>(big));
//     d.copy_to_device(big, s);        // asynchronous DMA from page-locked memory
//     s.synchronize();                 // the copy must finish before the scope ends
//   }
//   {
//     auto map = gpumem::mapped(gpumem::host_span<int>(flags));
//     launch(cfg, [v = map.array().view()] GPUMEM_HD (thread_index const& t) { ... });
//     s.synchronize();
//   }
//
// When a scope ends the range is unpinned AT ONCE (mempin's memory unpins when its last owner
// goes, even inside a defer_cleanup() guard, as Numba's _pin_finalizer), so the same memory can be
// pinned again right away (the spec's re-entry). Device work that uses the memory must have
// completed before the scope ends; a mapped_array taken out of the scope keeps the range pinned
// until it is dropped.
//
// Ownership: move-only; the pins belong to the scope. Thread safety: one scope per thread; the
// memory must not be pinned by two scopes at once (CUDA refuses overlapping registrations).
#pragma once

#include <gpumem/array/host_span.hpp>
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/manager/host_memory.hpp>

#include <cstddef>
#include <vector>

namespace gpumem {

namespace detail {
// mempin of the current context (mapped or not) over [ptr, ptr + bytes); nothing for 0 bytes.
host_memory pin_host_range(void* ptr, std::size_t bytes, bool mapped);
// Drops `pins` (each unpins when its last owner goes); warns about pins still shared elsewhere.
void release_pins(std::vector<host_memory>& pins) noexcept;
}  // namespace detail

class pinned_scope {
 public:
  pinned_scope() = default;
  pinned_scope(pinned_scope&& other) noexcept = default;
  pinned_scope& operator=(pinned_scope&& other) noexcept {
    if (this != &other) {
      detail::release_pins(pins_);
      pins_ = std::move(other.pins_);
    }
    return *this;
  }
  pinned_scope(pinned_scope const&) = delete;
  pinned_scope& operator=(pinned_scope const&) = delete;
  ~pinned_scope() { detail::release_pins(pins_); }

  // Pins one more range (a no-op for 0 bytes).
  void add(void* ptr, std::size_t bytes) {
    host_memory pin = detail::pin_host_range(ptr, bytes, false);
    if (pin.size() != 0) pins_.push_back(std::move(pin));
  }
  std::size_t count() const noexcept { return pins_.size(); }

 private:
  std::vector<host_memory> pins_;
};

// Pins every span for the life of the returned scope.
template <class... T>
[[nodiscard]] pinned_scope pinned(host_span<T>... spans) {
  pinned_scope scope;
  (scope.add(const_cast<void*>(static_cast<void const*>(spans.data())), spans.size_bytes()), ...);
  return scope;
}

template <class T>
class mapped_scope {
 public:
  explicit mapped_scope(host_span<T> span) {
    host_memory pin = detail::pin_host_range(span.data(), span.size_bytes(), true);
    if (pin.size() == 0) return;
    array_ = mapped_array<T>(pin);
    pins_.push_back(std::move(pin));
  }
  mapped_scope(mapped_scope&&) noexcept = default;
  mapped_scope(mapped_scope const&) = delete;
  mapped_scope& operator=(mapped_scope const&) = delete;
  mapped_scope& operator=(mapped_scope&&) = delete;
  ~mapped_scope() {
    array_ = mapped_array<T>();
    detail::release_pins(pins_);
  }

  // The mapped memory as a one-dimensional array: view() for kernels, operator() on the host.
  mapped_array<T> const& array() const noexcept { return array_; }

 private:
  std::vector<host_memory> pins_;
  mapped_array<T> array_;
};

template <class T>
[[nodiscard]] mapped_scope<T> mapped(host_span<T> span) {
  return mapped_scope<T>(span);
}

}  // namespace gpumem
