// pool_resource's whole-pool operations (see pool_state.hpp): trim, close, release_stream,
// statistics and memory info, and the block tracking of pool_options::track_blocks.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <limits>

namespace gpumem::detail {

// --- block tracking ------------------------------------------------------------------------------

void pool_state::track_allocate(void* ptr, std::size_t size, std::size_t requested, stream_handle) {
  std::lock_guard<std::mutex> lock(tracking_mutex_);
  auto const [it, fresh] =
      tracked_.emplace(reinterpret_cast<std::uintptr_t>(ptr), tracked_block{size, requested});
  if (!fresh)
    throw logic_error(name() + ": handed out " + pool_hex(it->first) + " twice (internal error)");
}

// A free must give the size that was asked for (memory_resource's contract), not only one that
// rounds to the same block: checked against the requested size, so a wrong size in the block's size
// class (or within its 256 bytes) is caught as well.
bool pool_state::track_deallocate(void* ptr, std::size_t requested) noexcept {
  std::lock_guard<std::mutex> lock(tracking_mutex_);
  auto it = tracked_.find(reinterpret_cast<std::uintptr_t>(ptr));
  std::string problem;
  if (it == tracked_.end())
    problem = "is not allocated (double free or foreign pointer)";
  else if (it->second.requested != requested)
    problem = "was allocated with " + std::to_string(it->second.requested) + " bytes, freed with " +
              std::to_string(requested);
  if (!problem.empty()) {
    refuse_deallocation(reinterpret_cast<std::uintptr_t>(ptr), requested);
    log(log_level::error, name() + ": deallocate(" +
                              pool_hex(reinterpret_cast<std::uintptr_t>(ptr)) + ", " +
                              std::to_string(requested) + "): " + problem + "; ignored");
    return false;
  }
  tracked_.erase(it);
  return true;
}

// --- whole-pool operations -----------------------------------------------------------------------

std::size_t pool_state::trim() {
  flush_request_.fetch_add(1, std::memory_order_relaxed);
  flush_calling_thread();
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& entry : streams_)
    drain_class_lists_locked(*entry.second);
  // No stream is named by this call: created streams are not queried or recorded on (one may have
  // been destroyed without release_stream). What their completed fences do not cover is reached
  // through one device synchronisation, as cudaFree waits for the device.
  bool wait = false;
  for (auto& entry : streams_) {
    pool_stream& s = *entry.second;
    settle_locked(s, nullptr);
    wait = wait || (!touchable(s, nullptr) && !s.released.load(std::memory_order_relaxed) &&
                    s.extents.bytes() > 0);
  }
  if (wait) complete_all_after_synchronizing(lock);
  poll_locked();
  std::size_t const trimmed = trim_locked();
  reap_retired_locked();
  growth_floor_ = growth_floor_next_ = 0;  // chunks as large as the blocks to come, not gone ones
  range_.slack = 1.0;                      // the expandable pool's target as configured again
  range_.moves_seen = 0;
  return trimmed;
}

// close(): everything the pool can release goes while the device's context is alive; nothing of
// the pool touches the device afterwards but the destructor's chunk give-back (give_back mode).
void pool_state::close(pool_live_chunks live) {
  if (is_closed()) return;
  join_orphan_sync();
  bool used = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    used = !chunks_.empty() || !streams_.empty() || !spare_events_.empty() ||
           growth_stream_ != nullptr || !caches_.empty();
  }
  if (!used) {  // never touched the device (set_memory_manager's probe): nothing to wait for
    closed_.store(live == pool_live_chunks::abandon ? closed_state::abandon
                                                    : closed_state::give_back_at_destruction,
                  std::memory_order_relaxed);
    return;
  }
  scoped_device const on_device(backend_, device_);
  try {
    backend_.synchronize();  // every stream idle: every fence complete, every freed block idle
    ++counts_.synchronizations;
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": close: synchronize failed: " + e.what());
  }
  flush_request_.fetch_add(1, std::memory_order_relaxed);
  flush_calling_thread();
  {
    std::lock_guard<std::mutex> registry(pool_registry_mutex());
    // Other threads' caches are not used again: their blocks stay where they are (their chunks
    // go at destruction) and their thread's exit no longer hands them back.
    for (auto& cache : caches_)
      cache->pool.store(nullptr);
  }
  // The bound of the frees to come (deallocate_after_close): nothing allocates any more.
  pool_statistics const at_close = statistics();
  std::lock_guard<std::mutex> lock(mutex_);
  live_blocks_at_close_ =
      at_close.allocations - std::min(at_close.allocations, at_close.deallocations);
  live_bytes_at_close_ = at_close.live_bytes;
  requested_bytes_at_close_ = at_close.requested_bytes;
  for (auto& entry : streams_) {
    pool_stream& s = *entry.second;
    drain_class_lists_locked(s);
    complete_all_fences_locked(s, cut_epoch_locked(s));
  }
  trim_locked();
  for (event_handle event : spare_events_) {
    try {
      backend_.destroy_event(event);
    } catch (std::exception const& e) {
      log(log_level::warn, name() + ": close: destroying an event failed: " + e.what());
    }
  }
  spare_events_.clear();
  if (growth_stream_ != nullptr) {
    try {
      backend_.destroy_stream(growth_stream_);
    } catch (std::exception const& e) {
      log(log_level::warn, name() + ": close: destroying its stream failed: " + e.what());
    }
    growth_stream_ = nullptr;
  }
  closed_.store(live == pool_live_chunks::abandon ? closed_state::abandon
                                                  : closed_state::give_back_at_destruction,
                std::memory_order_relaxed);
}

// A free after close(): the block's chunk goes as close() said, at destruction; the stream (maybe
// destroyed, like the context) is never named. Only the statistics take the free in, and only a
// free that can be one of the blocks live at close: with track_blocks, one the tracking knows;
// without, one that keeps the frees since close within the blocks and bytes live then (a double
// free or a foreign pointer past that would make more deallocations than allocations, or take a
// block still live out of live_bytes). Such a free is logged and counted as invalid.
void pool_state::deallocate_after_close(void* ptr, std::size_t bytes) noexcept {
  std::size_t const size = block_size(bytes);
  if (options_.track_blocks && !track_deallocate(ptr, bytes)) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t const freed = closed_freed_bytes_.load(std::memory_order_relaxed);
    std::size_t const requested = closed_freed_requested_.load(std::memory_order_relaxed);
    if (closed_frees_.load(std::memory_order_relaxed) < live_blocks_at_close_ &&
        size <= live_bytes_at_close_ - freed && bytes <= requested_bytes_at_close_ - requested) {
      closed_freed_bytes_.store(freed + size, std::memory_order_relaxed);
      closed_freed_requested_.store(requested + bytes, std::memory_order_relaxed);
      closed_frees_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  refuse_deallocation(reinterpret_cast<std::uintptr_t>(ptr), bytes);
  try {
    log(log_level::error, name() + ": deallocate(" +
                              pool_hex(reinterpret_cast<std::uintptr_t>(ptr)) + ", " +
                              std::to_string(bytes) +
                              ") after close(): more than was live at close() (double free or "
                              "foreign pointer); ignored");
  } catch (...) {  // no memory for the message: the count above still says it
  }
}

void pool_state::release_stream(stream_handle stream) {
  flush_calling_thread();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_stream& s = stream_locked(stream);
    drain_class_lists_locked(s);
    std::uint64_t const upto = cut_epoch_locked(s);
    backend_.synchronize_stream(stream);
    ++counts_.synchronizations;
    complete_all_fences_locked(s, upto);
    // The null and per-thread default streams are never destroyed: only a created stream's entry
    // is retired (its id names no later stream, so the entry would never be used again).
    if (s.key.which == pool_stream_key::kind::created) {
      s.released.store(true, std::memory_order_relaxed);
    } else if (s.per_thread && s.unused()) {
      // The calling thread's per-thread stream, which no cache of its names (it never allocated
      // here, or its caches went): no thread exit would retire the entry (retire_cache), so an
      // empty one goes now; using the stream later makes a new one.
      pool_stream_key const key = s.key;  // not a reference into the node erased
      streams_.erase(key);
      stream_count_.store(streams_.size(), std::memory_order_relaxed);
    }
  }
  // The calling thread's caches of released streams go now (their blocks were flushed above);
  // other threads drop theirs at their next miss. The entry goes with the last of them.
  drop_released_caches_of_calling_thread();
}

bool pool_state::is_released(pool_stream_key key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(key);
  if (it == streams_.end()) return released_keys_.count(key) > 0;
  return it->second->released.load(std::memory_order_relaxed);
}

pool_statistics pool_state::statistics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_statistics st;
  st.held_bytes = held_;
  st.peak_held_bytes = peak_held_;
  st.chunks = chunks_.size();
  std::int64_t live = static_cast<std::int64_t>(counts_.large_live) + counts_.retired_live;
  std::int64_t requested =
      static_cast<std::int64_t>(counts_.large_requested) + counts_.retired_requested;
  std::int64_t cached = 0;
  st.allocations = allocations_locked();
  st.deallocations = counts_.large_deallocations + counts_.retired_deallocations;
  // Frees after close() (counted apart: the pool no longer takes blocks back).
  live -= static_cast<std::int64_t>(closed_freed_bytes_.load(std::memory_order_relaxed));
  requested -= static_cast<std::int64_t>(closed_freed_requested_.load(std::memory_order_relaxed));
  st.deallocations += closed_frees_.load(std::memory_order_relaxed);
  for (auto const& cache : caches_) {
    live += cache->counters.live_bytes.load(std::memory_order_relaxed);
    requested += cache->counters.requested_bytes.load(std::memory_order_relaxed);
    cached += cache->counters.cached_bytes.load(std::memory_order_relaxed);
    st.deallocations += cache->counters.deallocations.load(std::memory_order_relaxed);
  }
  for (auto const& entry : streams_) {
    st.stream_bytes += entry.second->extents.bytes();
    cached += static_cast<std::int64_t>(entry.second->class_list_bytes.load());
  }
  st.live_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, live));
  st.requested_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, requested));
  st.cached_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, cached));
  st.free_bytes = free_.bytes();
  st.largest_free_block = free_.largest();
  st.events_recorded = counts_.events_recorded;
  st.events_completed = counts_.events_completed;
  st.stream_waits = counts_.stream_waits;
  st.idle_takes = counts_.idle_takes;
  st.device_queries = counts_.device_queries;
  st.synchronizations = counts_.synchronizations;
  st.upstream_allocations = counts_.upstream_allocations;
  st.upstream_deallocations = counts_.upstream_deallocations;
  st.invalid_deallocations = invalid_deallocations_.load();
  st.lock_acquisitions = counts_.lock_acquisitions;
  st.large_lock_wait_ns = counts_.large_lock_wait_ns;
  st.large_lock_hold_ns = counts_.large_lock_hold_ns;
  st.reclaims = counts_.reclaims;
  st.pages_mapped = range_.pages_mapped;
  st.pages_unmapped = range_.pages_unmapped;
  st.streams = streams_.size();
  return st;
}

std::uint64_t pool_state::allocations_locked() const noexcept {
  std::uint64_t n = counts_.large_allocations + counts_.retired_allocations;
  for (auto const& cache : caches_)
    n += cache->counters.allocations.load(std::memory_order_relaxed);
  return n;
}

memory_info pool_state::memory_info_snapshot() const {
  std::size_t held = 0;
  std::size_t internal = 0;
  {
    pool_statistics const st = statistics();
    held = st.held_bytes;
    internal = st.free_bytes + st.stream_bytes + st.cached_bytes;
  }
  std::size_t const room = options_.maximum_size - std::min(options_.maximum_size, held);
  memory_info info;
  scoped_device const on_device(backend_, device_);
  try {
    memory_info const up = upstream_.get_memory_info();
    info.total = std::min(up.total, options_.maximum_size);
    info.free = std::min(up.free, room) + internal;
  } catch (not_supported const&) {
    if (options_.maximum_size == std::numeric_limits<std::size_t>::max()) throw;
    info.total = options_.maximum_size;
    info.free = room + internal;
  }
  return info;
}

}  // namespace gpumem::detail
