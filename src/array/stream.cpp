// Streams for users (see stream.hpp). The keep-alive list is what makes asynchronous copies safe
// against dropping the last handle of an array: the stream's callback only flips a flag (CUDA
// forbids API calls inside it, and dropping memory may free it), and the objects themselves are
// released later on a user thread.
#include "handle_release.hpp"

#include <gpumem/array/event.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace gpumem {
namespace detail {

struct stream_state {
  enum class ownership { owned, borrowed };

  stream_state(device_backend& b, stream_handle h, ownership o, std::shared_ptr<void> owner = {})
      : backend(&b), handle(h), owns(o), external_owner(std::move(owner)) {
    if (owns == ownership::owned) {
      context& ctx = current_context();
      releases = ctx.shared_pending_resource_releases();
      device_reset = ctx.shared_device_reset_flag();
      device = ctx.device();
    }
  }
  stream_state(stream_state const&) = delete;
  stream_state& operator=(stream_state const&) = delete;

  ~stream_state() {
    // After a reset of the CUDA context that made the stream (close_for_device_reset), the reset
    // has destroyed it with its work: its handle is not named again (handle_release.hpp).
    bool const reset = device_was_reset(device_reset);
    try {
      if (!reset && has_pending()) backend->synchronize_stream(handle);
    } catch (std::exception const& e) {
      log(log_level::error, std::string("stream: synchronize before release failed: ") + e.what());
    }
    kept.clear();
    if (owns != ownership::owned) return;
    release_handle(
        releases, device_reset,
        [b = backend, h = handle, d = device] {
          forget_in_manager(d, h);
          b->destroy_stream(h);
        },
        "stream");
  }

  // The manager of `device`'s context (if one exists) is told, before the stream is destroyed,
  // that it goes: a pool keeps what was freed on a stream and asks the stream about that memory
  // later (memory_manager::release_stream, docs/mr.md). Logged, never thrown.
  static void forget_in_manager(int device, stream_handle h) noexcept {
    try {
      if (context* const ctx = find_context(device)) ctx->memory_manager().release_stream(h);
    } catch (std::exception const& e) {
      log(log_level::warn,
          std::string("stream: releasing it from the memory manager failed: ") + e.what());
    }
  }

  bool has_pending() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto const& k : kept)
      if (!k.done->load(std::memory_order_acquire)) return true;
    return false;
  }

  // Releases the objects whose point in the stream has passed. The objects are moved out and
  // dropped outside the lock: dropping memory runs finalizers that may take other locks.
  void prune() {
    std::vector<entry> finished;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto keep_end = kept.begin();
      for (auto it = kept.begin(); it != kept.end(); ++it) {
        if (it->done->load(std::memory_order_acquire))
          finished.push_back(std::move(*it));
        else
          *keep_end++ = std::move(*it);
      }
      kept.erase(keep_end, kept.end());
    }
  }

  struct entry {
    std::shared_ptr<void> object;
    std::shared_ptr<std::atomic<bool>> done;
  };

  device_backend* backend;
  stream_handle handle;
  ownership owns;
  std::shared_ptr<void> external_owner;
  std::shared_ptr<pending_deallocations> releases;
  std::shared_ptr<std::atomic<bool> const> device_reset;  // of the context, for owned streams
  int device = 0;                                         // the context's, for owned streams
  std::mutex mutex;
  std::vector<entry> kept;
};

}  // namespace detail

namespace {

using detail::stream_state;

// The default streams' states live as long as their backend: when a test installs another
// backend, a new state is made and the old one is parked, never destroyed (objects it still keeps
// belong to the old backend, which may be gone).
std::shared_ptr<stream_state> borrowed_state(std::shared_ptr<stream_state>& slot,
                                             stream_handle (*handle_of)(device_backend&)) {
  device_backend& b = backend();
  if (!slot || slot->backend != &b) {
    if (slot) {
      static std::mutex parked_mutex;
      static auto* parked = new std::vector<std::shared_ptr<stream_state>>();
      std::lock_guard<std::mutex> lock(parked_mutex);
      parked->push_back(std::move(slot));
    }
    slot = std::make_shared<stream_state>(b, handle_of(b), stream_state::ownership::borrowed);
  }
  return slot;
}

std::shared_ptr<stream_state> legacy_default_state() {
  static std::mutex mutex;
  static auto* slot = new std::shared_ptr<stream_state>();
  std::lock_guard<std::mutex> lock(mutex);
  return borrowed_state(*slot, [](device_backend&) -> stream_handle { return nullptr; });
}

}  // namespace

stream::stream() : state_(legacy_default_state()) {}

stream stream::create(bool non_blocking) {
  device_backend& b = backend();
  stream_handle h = b.create_stream(non_blocking);
  try {
    return stream(std::make_shared<stream_state>(b, h, stream_state::ownership::owned));
  } catch (...) {
    b.destroy_stream(h);
    throw;
  }
}

stream stream::per_thread_default() {
  // Destroyed with its thread (after synchronising the stream if it still keeps objects).
  thread_local std::shared_ptr<stream_state> slot;
  return stream(borrowed_state(
      slot, [](device_backend& b) -> stream_handle { return b.per_thread_default_stream(); }));
}

stream stream::wrap(stream_handle external, std::shared_ptr<void> owner) {
  return stream(std::make_shared<stream_state>(
      backend(), external, stream_state::ownership::borrowed, std::move(owner)));
}

detail::stream_state& stream::state() const {
  GPUMEM_EXPECTS(state_ != nullptr, "stream is empty (moved from)");
  return *state_;
}

stream_handle stream::handle() const {
  return state().handle;
}

void stream::synchronize() const {
  stream_state& st = state();
  st.backend->synchronize_stream(st.handle);
  st.prune();
}

bool stream::query() const {
  stream_state& st = state();
  bool const idle = st.backend->query_stream(st.handle);
  if (idle) st.prune();
  return idle;
}

void stream::wait(event const& e) const {
  stream_state& st = state();
  GPUMEM_EXPECTS(static_cast<bool>(e), "stream::wait: the event is empty (never created)");
  st.backend->stream_wait_event(st.handle, e.handle());
}

event stream::record(bool timing) const {
  (void)state();  // refuse a moved-from stream before creating the event
  event e = event::create(timing);
  e.record(*this);
  return e;
}

void stream::keep_alive(std::shared_ptr<void> owner) const {
  stream_state& st = state();
  if (!owner) return;
  st.prune();
  auto done = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.kept.push_back({std::move(owner), done});
  }
  try {
    st.backend->enqueue_host_function(st.handle,
                                      [done] { done->store(true, std::memory_order_release); });
  } catch (...) {
    // Without the callback nothing would ever mark the entry done: wait for the stream instead.
    st.backend->synchronize_stream(st.handle);
    done->store(true, std::memory_order_release);
    st.prune();
    throw;
  }
}

auto_synchronize_scope::~auto_synchronize_scope() {
  if (!stream_) return;  // moved from: the scope that took the stream synchronises it
  try {
    stream_.synchronize();
  } catch (std::exception const& e) {
    log(log_level::error, std::string("stream::auto_synchronize: ") + e.what());
  }
}

}  // namespace gpumem
