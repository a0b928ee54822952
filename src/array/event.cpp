// Events for users (see event.hpp). The handle is destroyed through the context's queue of
// resource releases; the backend is remembered at creation so that the release goes to the
// backend that made the handle.
#include "handle_release.hpp"

#include <gpumem/array/event.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace gpumem {
namespace detail {

struct event_state {
  event_state(device_backend& b, bool with_timing, context& ctx)
      : backend(&b),
        releases(ctx.shared_pending_resource_releases()),
        device_reset(ctx.shared_device_reset_flag()),
        handle(b.create_event(with_timing)),
        timing(with_timing) {}
  event_state(event_state const&) = delete;
  event_state& operator=(event_state const&) = delete;
  ~event_state() {
    // After a reset of its CUDA context (close_for_device_reset) the event went with it: its
    // handle is not named again, now or when the queue runs the release (handle_release.hpp).
    release_handle(
        releases, device_reset, [b = backend, h = handle] { b->destroy_event(h); }, "event");
  }

  device_backend* backend;
  std::shared_ptr<pending_deallocations> releases;
  std::shared_ptr<std::atomic<bool> const> device_reset;
  event_handle handle;
  bool timing;
};

}  // namespace detail

namespace {
detail::event_state& checked(std::shared_ptr<detail::event_state> const& s, char const* what) {
  GPUMEM_EXPECTS(s != nullptr,
                 std::string("event::") + what + ": the event is empty (never created)");
  return *s;
}
}  // namespace

event event::create(bool timing) {
  event e;
  e.state_ = std::make_shared<detail::event_state>(backend(), timing, current_context());
  return e;
}

event_handle event::handle() const noexcept {
  return state_ ? state_->handle : nullptr;
}
bool event::timing() const noexcept {
  return state_ && state_->timing;
}

void event::record(stream const& s) const {
  auto& st = checked(state_, "record");
  st.backend->record_event(st.handle, s.handle());
}

bool event::query() const {
  auto& st = checked(state_, "query");
  return st.backend->query_event(st.handle);
}

void event::synchronize() const {
  auto& st = checked(state_, "synchronize");
  st.backend->synchronize_event(st.handle);
}

void event::wait(stream const& s) const {
  s.wait(*this);
}

float event::elapsed_time(event const& stop) const {
  auto& start_state = checked(state_, "elapsed_time (start)");
  auto& stop_state = checked(stop.state_, "elapsed_time (stop)");
  GPUMEM_EXPECTS(start_state.timing && stop_state.timing,
                 "event::elapsed_time: both events must be created with timing = true");
  return start_state.backend->elapsed_ms(start_state.handle, stop_state.handle);
}

}  // namespace gpumem
