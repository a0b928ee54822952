// pool_resource's streams (see pool_state.hpp): the per-stream entries (per-thread default streams
// owned by a thread serial, retired when their thread exits), the takes from and reclaims of other
// streams' free memory, and the class lists and give-backs of a stream's arena; its fences are in
// pool_fences.cpp, the waits for the device in pool_waits.cpp. Every function named *_locked runs
// with the pool's mutex held.
#include "pool_state.hpp"

#include <gpumem/core/detail/thread_identity.hpp>
#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>

namespace gpumem::detail {

// --- streams -----------------------------------------------------------------------------------

pool_stream_key pool_state::key_of(stream_handle handle) const {
  // The null handle and the legacy one (1) both name the legacy default stream (of the pool's
  // device, where its calls go: fence_locked), whichever device is current.
  if (handle == nullptr || reinterpret_cast<std::uintptr_t>(handle) == 1)
    return {pool_stream_key::kind::null_stream, 0};
  if (is_per_thread(handle)) return {pool_stream_key::kind::per_thread, this_thread_serial()};
  return {pool_stream_key::kind::created, backend_.stream_id(handle)};
}

pool_stream& pool_state::stream_locked(stream_handle handle) {
  pool_stream_key const key = key_of(handle);
  auto it = streams_.find(key);
  if (it != streams_.end()) {
    // Used again after release_stream (allowed while the stream lives): keep the entry.
    it->second->released.store(false, std::memory_order_relaxed);
    return *it->second;
  }
  // Streams and threads come and go: entries they left must not pile up.
  reap_retired_locked();
  // A released stream used again (allowed while it lives) is a stream like any other.
  if (released_keys_.erase(key) > 0)
    released_order_.erase(std::find(released_order_.begin(), released_order_.end(), key));
  bool const per_thread = key.which == pool_stream_key::kind::per_thread;
  auto s = std::make_unique<pool_stream>();
  s->handle = handle;
  s->key = key;
  s->owner_thread = per_thread ? key.id : 0;
  s->per_thread = per_thread;
  // A thread past its thread cache table (its thread_local destructors) has no cache to settle
  // this stream at its exit: the entry is retired from the start (its frees are fenced at once).
  s->retired = per_thread && pool_thread_exiting();
  s->class_lists.resize(num_classes_);
  s->class_used.resize(num_classes_);
  pool_stream& added = *streams_.emplace(key, std::move(s)).first->second;
  stream_count_.store(streams_.size(), std::memory_order_relaxed);
  // The pool's only stream until now may have taken whole free extents (large_slab_locked): it
  // is asked to fence what it holds in its next call, so that the newcomer's misses can have it
  // once that fence completes, instead of growing beside it.
  if (streams_.size() == 2)
    for (auto& entry : streams_)
      if (entry.second.get() != &added && entry.second->extents.bytes() > 0)
        entry.second->fence_wanted.store(true, std::memory_order_relaxed);
  return added;
}

bool pool_state::fenceable(pool_stream const& s) const noexcept {
  // The per-thread default stream names the caller's own stream: only its thread may record on it.
  // A released stream may be destroyed already, and a stale one was: nothing is recorded on it or
  // asked of it.
  if (s.released.load(std::memory_order_relaxed) || s.stale.load(std::memory_order_relaxed))
    return false;
  return !s.per_thread || s.owner_thread == this_thread_serial();
}

std::uintptr_t pool_state::take_from_other_stream_locked(std::size_t size, pool_stream& s) {
  // Not in an expandable pool: its growth moves pages of the free extents and the growing
  // stream's, and extents moved between streams left it mapping pages on most misses (an H100,
  // 16 threads, large blocks: 5.8 us per pair instead of 0.16).
  if (!options_.wait_across_streams || vrange_ != nullptr) return 0;
  // The smallest fit among the extents of the streams that may be recorded on. Their extents
  // change under their own locks: the fit is looked up again below, under the lock of the one
  // chosen. A stream whose lock is busy (its thread is carving or freeing) is passed over while
  // choosing: waiting for the locks of 15 busy streams took 5.5 us per miss on an H100 with 16
  // threads. Not the legacy default stream: a wait for it waits for every blocking stream, and
  // what it owns was mostly freed on released streams, which were synchronised already.
  // An owner that is not touchable (another thread's created stream, which may be gone) offers
  // only what its latest fence covers: `s` waits for that fence's event, never for its handle.
  auto const covers = [this, &s](pool_stream const& o, pool_extent_entry const& fit) {
    return touchable(o, &s) || (!o.fences.empty() && fit.second.epoch <= o.fences.back().epoch);
  };
  pool_stream* owner = nullptr;
  std::size_t owner_fit = 0;
  for (auto& entry : streams_) {
    pool_stream& o = *entry.second;
    if (&o == &s || o.released.load(std::memory_order_relaxed) ||
        o.key.which == pool_stream_key::kind::null_stream || o.extents.bytes() < size ||
        (!touchable(o, &s) && o.fences.empty()))
      continue;
    std::unique_lock<pool_lock> arena(o.mutex, std::try_to_lock);
    if (!arena.owns_lock()) continue;
    pool_extent_entry const* const fit = o.extents.best_fit(size);
    if (fit != nullptr && covers(o, *fit) && (owner == nullptr || fit->second.size < owner_fit)) {
      owner = &o;
      owner_fit = fit->second.size;
    }
  }
  if (owner == nullptr) return 0;
  event_handle event = nullptr;
  bool const record = touchable(*owner, &s);
  pool_extent_entry* fit = nullptr;
  std::unique_lock<pool_lock> arena(owner->mutex);
  try {
    // The null and per-thread handles name the current device's streams: the pool's must be
    // current.
    scoped_device const on_device(backend_, device_);
    fit = owner->extents.best_fit(size);
    if (fit == nullptr || !covers(*owner, *fit)) return 0;
    // A stream being captured into a graph cannot wait for an event recorded outside its capture,
    // nor may an event recorded in a capture be waited for outside it (the waiting stream would
    // join the capture). Asked under the owner's lock, just before the record.
    if (backend_.stream_is_capturing(s.handle) ||
        (record && backend_.stream_is_capturing(owner->handle)))
      return 0;
    if (record) {
      event = take_event_locked();
      // Recorded with the owner's lock held: the extent holds only blocks handed back before it.
      backend_.record_event(event, owner->handle);
      backend_.stream_wait_event(s.handle, event);
    } else {
      // The fence stays the owner's (polled as before): the wait is for its record, which is
      // not made again before the fence is seen complete.
      backend_.stream_wait_event(s.handle, owner->fences.back().event);
    }
  } catch (std::exception const& e) {
    if (event != nullptr) return_event_locked(event);
    log(log_level::warn, name() + ": taking another stream's free memory failed: " + e.what());
    return 0;
  }
  // The wait is for the record it followed (a backend's contract, as CUDA's): the event may be
  // recorded again at once.
  if (event != nullptr) return_event_locked(event);
  ++counts_.stream_waits;
  // The whole extent moves: `s` carves its next blocks from the rest without another wait, and
  // blocks of the two streams do not interleave in it. It leaves the owner's extents before `s`'s
  // lock is taken (never two stream locks at once; mutex_, held throughout, keeps the rest from
  // every other walk meanwhile), and the rest takes `s`'s current epoch: no fence recorded on `s`
  // before the wait covers it.
  std::uintptr_t const base = fit->second.start;
  std::size_t const whole = fit->second.size;
  std::uint64_t const owner_epoch = fit->second.epoch;
  pool_chunk* const chunk = fit->second.chunk;
  debit_owner_held(*owner, whole);
  owner->extents.take(*fit, whole);
  arena.unlock();
  if (whole > size) keep_rest_locked(s, *owner, base + size, whole - size, owner_epoch, chunk);
  return base;
}

void pool_state::debit_owner_held(pool_stream& owner, std::size_t taken) noexcept {
  // What the owner handed back and another stream took is no longer the owner's to fence: neither
  // count may say more than its extents hold, nor go below nothing (a negative net_returned would
  // put off the owner's next large-path fence by that much).
  if (owner.net_returned > 0)
    owner.net_returned -= std::min(owner.net_returned, static_cast<std::int64_t>(taken));
  owner.unfenced_bytes = std::min(owner.unfenced_bytes, owner.extents.bytes() - taken);
}

void pool_state::keep_rest_locked(pool_stream& s, pool_stream& owner, std::uintptr_t rest,
                                  std::size_t bytes, std::uint64_t owner_epoch,
                                  pool_chunk* chunk) noexcept {
  bool kept = false;
  {
    std::lock_guard<pool_lock> own(s.mutex);
    try {
      kept = add_extent(s.extents, rest, bytes, s.epoch, chunk);
      if (kept) s.unfenced_bytes += bytes;
    } catch (std::exception const&) {
    }
  }
  if (kept) return;
  // No memory for its node: back to the owner, as it was.
  std::lock_guard<pool_lock> back(owner.mutex);
  try {
    if (add_extent(owner.extents, rest, bytes, owner_epoch, chunk))
      owner.net_returned += static_cast<std::int64_t>(bytes);
  } catch (std::exception const&) {
    note_lost(rest, bytes);
  }
}

std::uintptr_t pool_state::take_from_idle_stream_locked(std::size_t size, pool_stream& s) {
  if (vrange_ != nullptr) return 0;  // as take_from_other_stream_locked
  // Candidates: the streams that may be asked (as in take_from_other_stream_locked: fenceable, not
  // the legacy default stream, whose query would touch every blocking stream) with an extent that
  // fits, smallest fit first; each costs a query of its stream, so at most pool_idle_queries are
  // asked per miss. A stream whose lock is busy is passed over.
  struct candidate {
    std::size_t fit;
    pool_stream* owner;
  };
  std::array<candidate, pool_idle_queries> best{};
  std::size_t found = 0;
  for (auto& entry : streams_) {
    pool_stream& o = *entry.second;
    if (&o == &s || !touchable(o, &s) || o.key.which == pool_stream_key::kind::null_stream ||
        o.extents.bytes() < size)  // bytes(): a hint, read without the lock
      continue;
    std::unique_lock<pool_lock> arena(o.mutex, std::try_to_lock);
    if (!arena.owns_lock()) continue;
    pool_extent_entry const* const fit = o.extents.best_fit(size);
    if (fit == nullptr) continue;
    // Kept sorted by fit: insert, dropping the largest when full.
    std::size_t at = found < best.size() ? found++ : best.size();
    while (at > 0 && best[at - 1].fit > fit->second.size) {
      if (at < best.size()) best[at] = best[at - 1];
      --at;
    }
    if (at < best.size()) best[at] = candidate{fit->second.size, &o};
  }
  if (found == 0) return 0;
  // A cached size (one block for a thread's refill) brings a slab of the extent with it, as a
  // slab of the free extents does (carve_batch): the stream's next refills then carve under its
  // own lock instead of coming back here.
  std::size_t const slab = size > options_.max_cached_size ? size : std::max(size, pool_slab_bytes);
  std::optional<scoped_device> on_device;  // the null and per-thread handles name the current one's
  for (std::size_t i = 0; i < found; ++i) {
    pool_stream& owner = *best[i].owner;
    std::uint64_t upto = 0;
    try {
      if (!on_device) on_device.emplace(backend_, device_);
      // A stream being captured may not be queried, and a block for a capture is left to the
      // capture's own rules (as take_from_other_stream_locked).
      if (backend_.stream_is_capturing(s.handle)) return 0;
      if (backend_.stream_is_capturing(owner.handle)) continue;
      upto = cut_epoch_locked(owner);
      ++counts_.device_queries;
      if (!backend_.query_stream(owner.handle)) continue;
    } catch (std::exception const& e) {
      log(log_level::warn, name() + ": asking whether a stream is idle failed: " + e.what());
      return 0;
    }
    std::unique_lock<pool_lock> arena(owner.mutex);
    pool_extent_entry* const fit = owner.extents.best_fit(size);
    // Freed after the cut (by a thread working on the owner meanwhile): not covered by the query.
    if (fit == nullptr || fit->second.epoch > upto) continue;
    std::uintptr_t const base = fit->second.start;
    std::size_t const taken = std::min(slab, fit->second.size);
    std::uint64_t const owner_epoch = fit->second.epoch;
    pool_chunk* const chunk = fit->second.chunk;
    debit_owner_held(owner, taken);
    owner.extents.take(*fit, taken);  // cuts from the start; the rest stays the owner's
    arena.unlock();
    // The slab's rest is free for every stream (the owner was idle): `s`'s from now, at its epoch.
    if (taken > size) keep_rest_locked(s, owner, base + size, taken - size, owner_epoch, chunk);
    ++counts_.idle_takes;
    return base;
  }
  return 0;
}

std::size_t pool_state::parked_by_others_locked(pool_stream const& s,
                                                bool (*which)(pool_stream const&)) const noexcept {
  std::size_t parked = 0;
  for (auto const& entry : streams_) {
    pool_stream const& other = *entry.second;
    if (&other != &s && which(other)) parked += parked_bytes(other);
  }
  return parked;
}

void* pool_state::reclaim_other_streams_locked(std::size_t size, pool_stream& s, bool quiet_only) {
  ++counts_.reclaims;
  ++reclaims_since_growth_;
  // Without a wait: the streams that `s` may not use (touchable) only poll their fences and are
  // asked to fence the rest in their own next calls; only the last resort waits (obtain).
  for (auto& entry : streams_)
    if (entry.second.get() != &s && (!quiet_only || quiet(*entry.second)))
      settle_locked(*entry.second, &s);
  poll_locked();
  return fit_locked(size, s);
}

void pool_state::reap_retired_locked() noexcept {
  for (auto it = streams_.begin(); it != streams_.end();) {
    pool_stream const& s = *it->second;
    // A created stream that no thread cache names may be gone without release_stream (the pool
    // cannot ask): its entry goes once it owns nothing, and comes back, empty, if it is used again.
    bool const gone = s.retired || s.released.load(std::memory_order_relaxed) ||
                      (s.key.which == pool_stream_key::kind::created && s.caches == 0);
    if (gone && s.unused()) {
      if (s.released.load(std::memory_order_relaxed)) remember_released_locked(s.key);
      it = streams_.erase(it);
    } else
      ++it;
  }
  stream_count_.store(streams_.size(), std::memory_order_relaxed);
}

void pool_state::remember_released_locked(pool_stream_key key) noexcept {
  try {
    if (!released_keys_.insert(key).second) return;
    released_order_.push_back(key);
  } catch (...) {
    released_keys_.erase(key);
    return;  // forgotten: a late free on it would take it for a new stream
  }
  if (released_order_.size() > pool_released_memory) {
    released_keys_.erase(released_order_.front());
    released_order_.pop_front();
  }
}

void pool_state::drain_class_lists_locked(pool_stream& s, bool cold_only) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<pool_lock> arena(s.mutex);
  drain_class_lists_held(s, cold_only);
}

void pool_state::drain_class_lists_held(pool_stream& s, bool cold_only) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return;
  if (cold_only) ++s.misses;
  drain_lists_from_held(s, 0, cold_only);
}

void pool_state::bound_merged_lists_held(pool_stream& s) noexcept {
  if (s.merged_listed <= merged_list_limit()) return;
  // All of them: the cold-list marks (misses, class_used) count the stream's misses, not these
  // merges, and are left alone.
  try {
    drain_lists_from_held(s, first_merged_class_, /*cold_only=*/false);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": merging a stream's class lists failed: " + e.what());
  }
}

void pool_state::drain_lists_from_held(pool_stream& s, unsigned first, bool cold_only) {
  std::shared_lock<std::shared_mutex> chunks(chunks_mutex_);
  for (unsigned c = first; c < num_classes_; ++c) {
    if (cold_only && s.class_used[c] + 1 >= s.misses) continue;
    auto& list = s.class_lists[c];
    std::size_t const size = pool_class_size(c);
    while (!list.empty()) {
      // Without memory for an extent node the rest stays listed: still the stream's, not lost.
      if (!give_back_held(list.back(), size, s)) return;
      list.pop_back();
      s.remove_listed(size, merged_class(c));
    }
  }
}

bool pool_state::give_back_held(void* ptr, std::size_t size, pool_stream& s) noexcept {
  auto const addr = reinterpret_cast<std::uintptr_t>(ptr);
  try {
    // Not covered by any fence recorded before: it takes the current epoch.
    if (add_extent(s.extents, addr, size, s.epoch, chunk_of(addr))) s.unfenced_bytes += size;
    return true;
  } catch (...) {
    return false;  // no memory for a node (a block that joins a neighbour needs none): unchanged
  }
}

bool pool_state::give_back_locked(void* ptr, std::size_t size, pool_stream& s) noexcept {
  std::lock_guard<pool_lock> arena(s.mutex);
  return give_back_held(ptr, size, s);
}

void pool_state::after_give_back_locked(pool_stream& s, std::size_t threshold) noexcept {
  // With a single stream nobody waits for a fence; with several, one event per fence_bytes freed.
  // Only this stream's fences are polled here: walking every stream on each batch is what made
  // threads on separate streams serialise; the slow path polls them all when someone runs short.
  if (streams_.size() < 2 || !fenceable(s)) return;
  {
    std::lock_guard<pool_lock> arena(s.mutex);
    if (s.unfenced_bytes < threshold && !s.fence_wanted.load(std::memory_order_relaxed)) return;
  }
  fence_or_warn_locked(s, 0);
}

}  // namespace gpumem::detail
