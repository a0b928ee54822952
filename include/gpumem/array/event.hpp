// gpumem/array/event.hpp
//
// An event for users (Numba's cuda.event()): record it on a stream, query or wait for it on the
// host, make another stream wait for it, and time the work between two timing events.
//
//   event start = event::create(), stop = event::create();
//   start.record(s); d.copy_to_device(host, s); stop.record(s);
//   stop.synchronize();
//   float ms = event_elapsed_time(start, stop);
//
// Ownership: copies share one handle; it is destroyed when the last copy goes, through the
// current context's queue of resource releases (pending_resource_releases). A default-constructed
// event holds nothing; using it is a logic_error. Thread safety: as the backend's event calls (any
// thread); one object is not modified concurrently. Stream semantics: as CUDA's.
#pragma once

#include <gpumem/array/stream.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <memory>

namespace gpumem {

namespace detail {
struct event_state;
}  // namespace detail

class event {
 public:
  event() = default;
  // `timing`: the event records a timestamp (needed by event_elapsed_time).
  static event create(bool timing = true);

  event_handle handle() const noexcept;
  bool timing() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

  // Captures the work submitted to `s` so far.
  void record(stream const& s = stream()) const;
  // True when the recorded work has completed (and for an event never recorded).
  bool query() const;
  // Blocks the calling thread until the recorded work has completed.
  void synchronize() const;
  // Work submitted to `s` from now on waits for this event.
  void wait(stream const& s) const;
  // Milliseconds between this event and `stop`; both must be timing events that have completed.
  float elapsed_time(event const& stop) const;

 private:
  std::shared_ptr<detail::event_state> state_;
};

// Numba's event_elapsed_time(evtstart, evtend).
inline float event_elapsed_time(event const& start, event const& stop) {
  return start.elapsed_time(stop);
}

}  // namespace gpumem
