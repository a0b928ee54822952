// pool_resource's fences (see pool_state.hpp): events recorded over what a stream handed back, the
// epochs that order them, the moves of completed extents to the free ones, the settling of a
// stream (idle, released, fenced, or left to a device synchronisation: pool_waits.cpp). Every
// function named *_locked runs with the pool's mutex held.
#include "pool_state.hpp"

#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <string>

namespace gpumem::detail {

void pool_state::return_event_locked(event_handle event) noexcept {
  try {
    spare_events_.push_back(event);
  } catch (...) {  // no memory to keep it: destroyed instead
    try {
      scoped_device const on_device(backend_, device_);
      backend_.destroy_event(event);
    } catch (...) {
    }
  }
}

event_handle pool_state::take_event_locked() {
  if (!spare_events_.empty()) {
    event_handle e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  scoped_device const on_device(backend_, device_);
  return backend_.create_event(false);
}

// Covers the stream's extents handed back so far. Its class lists stay private to it (blocks
// drained from them later take the then-current epoch, so a fence never covers a block that was
// still listed when it was recorded): fencing is one event record, never a walk over the lists.
// The record happens under the stream's lock, so no extent is handed back between the record and
// the epoch's increment.
void pool_state::fence_locked(pool_stream& s) {
  if (!fenceable(s)) return;
  std::lock_guard<pool_lock> arena(s.mutex);
  s.fence_wanted.store(false, std::memory_order_relaxed);
  if (s.unfenced_bytes == 0) return;
  // The null and per-thread handles name the current device's stream: the pool's device must be
  // current (callers need not make it so: selects_own_device).
  scoped_device const on_device(backend_, device_);
  // A free may reach a created stream's entry through the thread's last cache, matched by handle:
  // the handle may name a newer stream at a destroyed one's address, whose events would not
  // follow the old stream's work. The handle is the caller's (alive): its id tells.
  if (s.key.which == pool_stream_key::kind::created && backend_.stream_id(s.handle) != s.key.id) {
    s.stale.store(true, std::memory_order_relaxed);
    return;
  }
  // An event recorded while the stream is captured into a graph is a node of the graph, not a
  // record: queried, it would read as complete before the graph has run. The extents wait for a
  // fence recorded outside the capture.
  if (backend_.stream_is_capturing(s.handle)) return;
  event_handle event = take_event_locked();
  try {
    backend_.record_event(event, s.handle);
  } catch (...) {
    return_event_locked(event);
    throw;
  }
  s.fences.push_back({event, s.epoch});
  ++s.epoch;
  s.unfenced_bytes = 0;
  s.net_returned = 0;
  ++counts_.events_recorded;
}

void pool_state::fence_or_warn_locked(pool_stream& s, std::size_t poll_at) noexcept {
  if (!fenceable(s)) {
    s.fence_wanted.store(false, std::memory_order_relaxed);
    return;
  }
  try {
    fence_locked(s);
    if (s.fences.size() >= poll_at) poll_stream_locked(s);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": fence failed: " + e.what());
  }
}

std::uint64_t pool_state::cut_epoch_locked(pool_stream& s) {
  std::lock_guard<pool_lock> arena(s.mutex);
  return s.epoch++;
}

void pool_state::complete_all_fences_locked(pool_stream& s, std::uint64_t upto) {
  // Fences are recorded under mutex_: the ones up to the cut predate it. A fence recorded after it
  // (while complete_all_after_synchronizing had the mutex released) covers later extents: it stays.
  while (!s.fences.empty() && s.fences.front().epoch <= upto) {
    return_event_locked(s.fences.front().event);
    s.fences.pop_front();
    ++counts_.events_completed;
  }
  release_owner_locked(s, upto);
}

bool pool_state::complete_if_idle_locked(pool_stream& s) {
  if (!fenceable(s)) return false;
  std::uint64_t const upto = cut_epoch_locked(s);
  // An idle stream has finished everything queued before every free handed back up to the cut:
  // no event is needed for them.
  ++counts_.device_queries;
  scoped_device const on_device(backend_, device_);  // as fence_locked
  if (!backend_.query_stream(s.handle)) return false;
  complete_all_fences_locked(s, upto);
  return true;
}

bool pool_state::touchable(pool_stream const& s, pool_stream const* caller) const noexcept {
  return fenceable(s) && (s.key.which != pool_stream_key::kind::created || &s == caller ||
                          options_.query_other_streams);
}

void pool_state::settle_locked(pool_stream& s, pool_stream const* caller) {
  drain_class_lists_locked(s);
  if (s.extents.bytes() == 0 && s.fences.empty()) return;
  if (s.released.load(std::memory_order_relaxed)) {
    // Given back with release_stream, which waited for it; frees on it since then waited for it
    // too (deallocate_on_released). It may be destroyed by now: never queried or recorded on.
    complete_all_fences_locked(s, cut_epoch_locked(s));
    return;
  }
  if (touchable(s, caller)) {
    if (complete_if_idle_locked(s)) return;
    fence_locked(s);
    return;
  }
  // Its handle is not to be used in this call: its own fences, and a fence of the rest at its
  // next call.
  poll_stream_locked(s);
  if (s.extents.bytes() > 0) s.fence_wanted.store(true, std::memory_order_relaxed);
}

bool pool_state::poll_stream_locked(pool_stream& s) {
  std::uint64_t completed = s.completed;
  while (!s.fences.empty() &&
         (++counts_.device_queries, backend_.query_event(s.fences.front().event))) {
    completed = s.fences.front().epoch;
    return_event_locked(s.fences.front().event);
    s.fences.pop_front();
    ++counts_.events_completed;
  }
  if (completed == s.completed) return false;
  std::size_t const before = free_.bytes();
  release_owner_locked(s, completed);
  return free_.bytes() != before;
}

bool pool_state::poll_locked() {
  bool released = false;
  for (auto& entry : streams_)
    if (!entry.second->fences.empty()) released |= poll_stream_locked(*entry.second);
  return released;
}

void pool_state::release_owner_locked(pool_stream& s, std::uint64_t upto) {
  std::lock_guard<pool_lock> arena(s.mutex);
  s.completed = std::max(s.completed, std::min(upto, s.epoch));
  auto& owned = s.extents.extents();
  for (auto it = owned.begin(); it != owned.end();) {
    if (it->second.epoch > upto) {
      ++it;
      continue;
    }
    try {
      // Same chunk, so it is inside one; no overlap with free extents unless the pool is corrupt.
      add_extent(free_, it->second.start, it->second.size, 0, it->second.chunk);
    } catch (std::exception const& e) {
      log(log_level::error,
          name() + ": could not free " + pool_hex(it->second.start) + ": " + e.what());
      ++it;
      continue;
    }
    it = s.extents.erase(it);
  }
  // Unfenced bytes are among those the stream still owns.
  s.unfenced_bytes = std::min(s.unfenced_bytes, s.extents.bytes());
}

}  // namespace gpumem::detail
