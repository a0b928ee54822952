// gpumem/array/stream.hpp
//
// A stream for users: the C++ form of Numba's cuda.stream(), default_stream(),
// per_thread_default_stream() and external_stream(). Copies of a `stream` share one state;
// the handle is destroyed when the last copy goes — through the current context's queue of
// resource releases (pending_resource_releases), as the spec defers stream destruction.
//
//   stream s = stream::create();
//   d.copy_to_device(host, s);              // asynchronous on s
//   { auto sync = s.auto_synchronize(); ... }  // s.synchronize() when the scope ends
//
// Lifetime of memory used by asynchronous work: the array layer calls keep_alive() with the
// owner of every array an asynchronous copy touches, so dropping the last array handle while the
// copy is in flight cannot free its memory early. An object handed to keep_alive() is released
// (on a user thread, never inside the stream's callback, where CUDA forbids API calls) after the
// stream has passed the point where it was handed over: at the next keep_alive(), synchronize() or
// query() that finds it done, or when the stream state goes (which then synchronises first).
//
// Moving a stream leaves the source empty: `static_cast<bool>(s)` turns false, and every other
// member (handle(), is_default(), comparisons, synchronize(), ...) throws gpumem::logic_error
// "stream is empty (moved from)". Assigning another stream to it makes it usable again. An
// auto_synchronize_scope that was moved from synchronises nothing when it ends.
//
// Ownership: create() owns its handle; default, per-thread default and wrap() streams do not
// (wrap() may keep the external stream's owner alive). An owned stream is given back to its
// context's memory manager (memory_manager::release_stream) just before it is destroyed, through
// the context's queue of resource releases. Thread safety: every member may be
// called from any thread; the keep-alive list has its own mutex. Stream semantics: as CUDA's.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <functional>
#include <memory>

namespace gpumem {

class event;
class auto_synchronize_scope;

namespace detail {
struct stream_state;
}  // namespace detail

class stream {
 public:
  // The legacy default stream (Numba's default_stream()).
  stream();
  // A new stream (Numba's cuda.stream()); `non_blocking`: does not synchronise with the legacy
  // default stream.
  static stream create(bool non_blocking = false);
  static stream legacy_default() { return stream(); }
  // The calling thread's per-thread default stream (cudaStreamPerThread).
  static stream per_thread_default();
  // An external stream (e.g. cudaStream_t from another library), not destroyed by gpumem;
  // `owner` (may be empty) is kept alive as long as this stream state exists.
  static stream wrap(stream_handle external, std::shared_ptr<void> owner = {});

  // False only for a moved-from stream (see the file comment).
  explicit operator bool() const noexcept { return state_ != nullptr; }
  stream_handle handle() const;
  // True for the legacy default stream.
  bool is_default() const { return handle() == nullptr; }
  // Waits for all work on the stream, then releases finished keep-alives.
  void synchronize() const;
  // True when all work submitted so far has completed.
  bool query() const;
  // Work submitted to this stream from now on waits for `e` (cudaStreamWaitEvent).
  void wait(event const& e) const;
  // Records a new event on this stream and returns it.
  event record(bool timing = false) const;
  // Keeps `owner` alive until the stream has passed the work submitted so far.
  void keep_alive(std::shared_ptr<void> owner) const;

  // A scope that synchronises this stream when it ends (Numba's
  // `with stream.auto_synchronize():`).
  [[nodiscard]] auto_synchronize_scope auto_synchronize() const;

  friend bool operator==(stream const& a, stream const& b) { return a.handle() == b.handle(); }
  friend bool operator!=(stream const& a, stream const& b) { return !(a == b); }

 private:
  explicit stream(std::shared_ptr<detail::stream_state> state) : state_(std::move(state)) {}
  // The shared state; throws logic_error on a moved-from stream (state_ null).
  detail::stream_state& state() const;
  std::shared_ptr<detail::stream_state> state_;
};

// Synchronises its stream when destroyed. Errors of that synchronisation are logged, not thrown
// (it runs in a destructor). A scope that was moved from holds an empty stream and does nothing.
class auto_synchronize_scope {
 public:
  explicit auto_synchronize_scope(stream s) : stream_(std::move(s)) {}
  auto_synchronize_scope(auto_synchronize_scope&&) = default;
  auto_synchronize_scope(auto_synchronize_scope const&) = delete;
  auto_synchronize_scope& operator=(auto_synchronize_scope const&) = delete;
  auto_synchronize_scope& operator=(auto_synchronize_scope&&) = delete;
  ~auto_synchronize_scope();

 private:
  stream stream_;
};

inline auto_synchronize_scope stream::auto_synchronize() const {
  (void)state();  // a moved-from stream has nothing to synchronise: refuse it here, not later
  return auto_synchronize_scope(*this);
}

}  // namespace gpumem
