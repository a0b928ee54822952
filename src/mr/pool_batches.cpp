// pool_resource's back end, second half: batches between thread caches and the per-stream class
// lists, the large-size path, cache lifetimes, block tracking, and the whole-pool operations
// (trim, release_stream, statistics). The extents are in pool_state.cpp,
// fences in pool_streams.cpp, growth in pool_growth.cpp.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace gpumem::detail {

namespace {

// What a thread takes from the free extents for its stream's arena at a time (at least its batch).
constexpr std::size_t pool_slab_bytes = 8 * MiB;
// A stream merges all of its class lists back, under its own lock, at most this often between two
// growths it makes.
constexpr std::uint64_t pool_full_drains_per_growth = 8;
// The large path's fences on one stream pending before that stream polls them itself.
constexpr std::size_t pool_large_fences_polled = 8;

}  // namespace

// --- front-end support ---------------------------------------------------------------------------

void pool_state::refill(pool_thread_cache& cache, unsigned cls) {
  pool_bin& bin = cache.bins[cls];
  pool_stream& s = *cache.stream;
  std::size_t const size = pool_class_size(cls);
  std::uint32_t const want = std::max<std::uint32_t>(1, bin.cap / 2);
  std::uint32_t got = 0;
  {
    // Blocks this stream freed earlier, or carved from its extents: its lock alone, never the
    // pool's mutex.
    std::lock_guard<std::mutex> arena(s.mutex);
    auto& list = s.class_lists[cls];
    s.class_used[cls] = s.misses;
    while (got < want && !list.empty()) {
      bin.slots[bin.count++] = list.back();
      list.pop_back();
      ++got;
    }
    s.remove_listed(got * size);
    s.refills.fetch_add(1, std::memory_order_relaxed);
    if (got == 0) got = carve_own_held(cache, cls, want);
  }
  if (got == 0) got = carve_batch(cache, cls, want);
  pool_bump(cache.counters.cached_bytes, got * size);
}

std::uint32_t pool_state::carve_own_held(pool_thread_cache& cache, unsigned cls,
                                         std::uint32_t want) {
  pool_bin& bin = cache.bins[cls];
  pool_stream& s = *cache.stream;
  std::size_t const size = pool_class_size(cls);
  auto& own = s.extents;
  // As many blocks as one extent gives (up to `want`): the best fit for all of them, else the
  // best fit for one.
  auto carve = [&]() -> std::uint32_t {
    if (own.empty()) return 0;
    auto const it = own.best_fit_batch(size, want);
    if (it == own.extents().end()) return 0;
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, it->second.size / size));
    bin.push_run(own.take(it, n * size), n, size);
    return n;
  };
  if (std::uint32_t n = carve()) return n;
  split_block const split = split_larger_held(cls, s);
  if (split.base != 0) {
    // A block of a larger class of this stream, cut into blocks of this class; the rest goes to
    // the stream's extents. Cheaper than draining lists to find a fit.
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, split.size / size));
    bin.push_run(split.base, n, size);
    if (split.size > n * size) {
      std::shared_lock<std::shared_mutex> chunks(chunks_mutex_);
      give_back_held(reinterpret_cast<void*>(split.base + n * size), split.size - n * size, s);
    }
    return n;
  }
  // Lists this stream has not used since its previous miss, merged back into its extents.
  drain_class_lists_held(s, /*cold_only=*/true);
  if (std::uint32_t n = carve()) return n;
  // Then all of its lists, a bounded number of times per growth of the stream: merging the lists
  // in use makes the stream carve them again.
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0 ||
      s.full_drains >= pool_full_drains_per_growth)
    return 0;
  ++s.full_drains;
  drain_class_lists_held(s);
  return carve();
}

std::uint32_t pool_state::carve_batch(pool_thread_cache& cache, unsigned cls, std::uint32_t want) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++lock_acquisitions_;
  pool_bin& bin = cache.bins[cls];
  pool_stream& s = *cache.stream;
  std::size_t const size = pool_class_size(cls);
  // A slab of the free extents for the stream's arena: the batch, and with it up to
  // pool_slab_bytes for the stream's next carves, made under its lock alone.
  auto const it = free_.best_fit_batch(size, want);
  if (it != free_.extents().end()) {
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, it->second.size / size));
    std::size_t slab = std::min(it->second.size, std::max(n * size, pool_slab_bytes));
    std::uintptr_t const base = it->second.start;
    if (slab > n * size) {
      // The rest goes to the stream first: that insert may fail (then the slab is just the
      // batch), the take below cannot.
      std::lock_guard<std::mutex> arena(s.mutex);
      try {
        if (add_extent(s.extents, base + n * size, slab - n * size, s.epoch, it->second.chunk))
          s.unfenced_bytes += slab - n * size;
        else
          slab = n * size;
      } catch (std::exception const&) {
        slab = n * size;
      }
    }
    free_.take(it, slab);
    bin.push_run(base, n, size);
    return n;
  }
  bin.slots[bin.count++] = obtain(lock, size, s, /*own_tried=*/true);
  return 1;
}

pool_state::split_block pool_state::split_larger_held(unsigned cls, pool_stream& s) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return {0, 0};
  for (unsigned c = cls + 1; c < num_classes_; ++c) {
    auto& list = s.class_lists[c];
    if (list.empty()) continue;
    split_block const block{reinterpret_cast<std::uintptr_t>(list.back()), pool_class_size(c)};
    list.pop_back();
    s.remove_listed(block.size);
    return block;
  }
  return {0, 0};
}

void pool_state::overflow(pool_thread_cache& cache, unsigned cls) noexcept {
  pool_bin& bin = cache.bins[cls];
  pool_stream& s = *cache.stream;
  std::size_t const size = pool_class_size(cls);
  std::uint32_t const move = std::max<std::uint32_t>(1, bin.cap / 2);
  // Parked on the stream's own lists (its lists lock only): no other stream may take them until
  // they are drained into extents, so they need no fence now.
  try {
    std::lock_guard<std::mutex> lists(s.mutex);
    auto& list = s.class_lists[cls];
    s.class_used[cls] = s.misses;
    list.reserve(list.size() + move);
    for (std::uint32_t i = 0; i < move; ++i)
      list.push_back(bin.slots[--bin.count]);
    s.add_listed(move * size);
  } catch (...) {
    // No memory for the list: hand the blocks to the extents instead.
    std::lock_guard<std::mutex> lock(mutex_);
    ++lock_acquisitions_;
    for (std::uint32_t i = 0; i < move; ++i)
      give_back_locked(bin.slots[--bin.count], size, s);
    after_give_back_locked(s, options_.fence_bytes);
  }
  pool_bump(cache.counters.cached_bytes, -static_cast<std::int64_t>(move * size));
}

void pool_state::flush_cache_locked(pool_thread_cache& cache) noexcept {
  pool_stream& s = *cache.stream;
  std::int64_t moved_bytes = 0;
  std::unique_lock<std::mutex> lists(s.mutex);
  for (unsigned c = 0; c < cache.num_classes; ++c) {
    pool_bin& bin = cache.bins[c];
    std::size_t const size = pool_class_size(c);
    while (bin.count > 0) {
      void* p = bin.slots[bin.count - 1];
      try {
        s.class_lists[c].push_back(p);
        s.add_listed(size);
      } catch (...) {
        lists.unlock();  // give_back_locked takes the stream's lock itself
        give_back_locked(p, size, s);
        lists.lock();
      }
      --bin.count;
      moved_bytes += static_cast<std::int64_t>(size);
    }
  }
  pool_bump(cache.counters.cached_bytes, -moved_bytes);
}

// --- the large path ------------------------------------------------------------------------------
// A block above max_cached_size is carved from the calling thread's stream's own extents under
// that stream's lock alone, and handed back there the same way: with one thread per stream, a
// large allocate+free pair meets no other thread. Only a miss takes the pool's mutex (obtain).
// Frees are fenced in batches (large_fence_bytes), never one event per block.

void* pool_state::take_large_own(pool_thread_cache& cache, std::size_t size) noexcept {
  pool_stream& s = *cache.stream;
  std::lock_guard<std::mutex> arena(s.mutex);
  if (s.extents.empty()) return nullptr;
  auto const it = s.extents.best_fit(size);
  if (it == s.extents.extents().end()) return nullptr;
  std::uintptr_t const addr = it->second.start;  // take() cuts from the start
  try {
    large_blocks_.insert(addr, {size, it->second.chunk});
  } catch (std::bad_alloc const&) {
    return nullptr;  // nothing changed: the shared path tries (and reports) it
  }
  s.extents.take(it, size);
  s.net_returned -= static_cast<std::int64_t>(size);
  s.refills.fetch_add(1, std::memory_order_relaxed);  // the stream is allocating: not quiet
  return reinterpret_cast<void*>(addr);
}

bool pool_state::check_large_free(std::uintptr_t addr, std::size_t size,
                                  pool_chunk*& chunk) noexcept {
  switch (large_blocks_.remove(addr, size, chunk)) {
    case pool_large_blocks::outcome::removed:
      return true;
    case pool_large_blocks::outcome::not_live:
      log(log_level::error, name() + ": deallocate(" + pool_hex(addr) + ", " +
                                std::to_string(size) +
                                " B): not a live block of this pool (double free or foreign "
                                "pointer); ignored");
      break;
    case pool_large_blocks::outcome::wrong_size:
      log(log_level::error, name() + ": deallocate(" + pool_hex(addr) + ", " +
                                std::to_string(size) +
                                " B): the block was allocated with another size; ignored");
      break;
  }
  return false;
}

pool_state::own_free pool_state::give_back_large_own(pool_thread_cache& cache, void* ptr,
                                                     std::size_t size) noexcept {
  pool_stream& s = *cache.stream;
  auto const addr = reinterpret_cast<std::uintptr_t>(ptr);
  pool_chunk* chunk = nullptr;
  if (!check_large_free(addr, size, chunk)) return own_free::refused;
  bool fence = false;
  {
    std::lock_guard<std::mutex> arena(s.mutex);
    // The range's chunk of an expandable pool changes size under chunks_mutex_: read it under it.
    std::shared_lock<std::shared_mutex> chunks(chunks_mutex_, std::defer_lock);
    if (vrange_ != nullptr) chunks.lock();
    try {
      if (!add_extent(s.extents, addr, size, s.epoch, chunk)) return own_free::refused;
    } catch (std::exception const&) {
      // No memory for the node: the shared path tries again (and logs if it fails too).
      try {
        large_blocks_.insert(addr, {size, chunk});
      } catch (...) {
      }
      return own_free::elsewhere;
    }
    s.unfenced_bytes += size;
    s.net_returned += static_cast<std::int64_t>(size);
    // A stream that takes back about what it frees needs no fence: its blocks come back to it.
    // One that frees more than it takes (the consumer of a producer) is fenced every
    // large_fence_bytes of that excess, so that others can use it. With a single stream nobody
    // waits for a fence.
    fence = s.net_returned >= static_cast<std::int64_t>(large_fence_bytes()) &&
            stream_count_.load(std::memory_order_relaxed) > 1;
  }
  if (fence) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++lock_acquisitions_;
    fence_large_locked(s);
  }
  return own_free::taken;
}

void pool_state::fence_large_locked(pool_stream& s) noexcept {
  if (streams_.size() < 2 || !fenceable(s)) return;
  try {
    fence_locked(s);
    if (s.fences.size() >= pool_large_fences_polled) poll_stream_locked(s);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": fence failed: " + e.what());
  }
}

void* pool_state::allocate_large(std::size_t size, std::size_t requested, stream_handle stream) {
  void* p = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ++lock_acquisitions_;
    pool_stream& s = stream_locked(stream);
    s.refills.fetch_add(1, std::memory_order_relaxed);
    p = obtain(lock, size, s);
    if (requested > options_.max_cached_size) {
      auto const addr = reinterpret_cast<std::uintptr_t>(p);
      try {
        large_blocks_.insert(addr, {size, chunk_of(addr)});
      } catch (...) {
        give_back_locked(p, size, s);
        throw;
      }
    }
    large_live_ += size;
    large_requested_ += requested;
    ++large_allocations_;
  }
  if (options_.track_blocks) track_allocate(p, size, requested, stream);
  return p;
}

void pool_state::deallocate_large(void* ptr, std::size_t size, std::size_t requested,
                                  stream_handle stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++lock_acquisitions_;
  pool_stream* s = nullptr;
  try {
    s = &stream_locked(stream);
  } catch (std::exception const& e) {
    log(log_level::error,
        name() + ": lost " + pool_hex(reinterpret_cast<std::uintptr_t>(ptr)) + ": " + e.what());
    return;
  }
  // A large block must be live (a double free on any stream is caught); a cached size freed
  // without a thread cache is checked against every stream's extents.
  pool_chunk* chunk = nullptr;
  if (requested > options_.max_cached_size
          ? !check_large_free(reinterpret_cast<std::uintptr_t>(ptr), size, chunk)
          : overlaps_extent_locked(reinterpret_cast<std::uintptr_t>(ptr), size))
    return;
  give_back_locked(ptr, size, *s);
  large_live_ -= size;
  large_requested_ -= requested;
  ++large_deallocations_;
  if (s->retired) {
    // Freed by an exiting thread after its stream was settled (from a later thread_local
    // destructor): the last moment its per-thread stream can be fenced.
    try {
      fence_locked(*s);
    } catch (std::exception const& e) {
      log(log_level::warn, name() + ": fence failed: " + e.what());
    }
    return;
  }
  after_give_back_locked(*s, large_fence_bytes());
}

std::shared_ptr<pool_thread_cache> pool_state::make_cache(stream_handle stream) {
  auto cache = std::make_shared<pool_thread_cache>();
  cache->num_classes = num_classes_;
  cache->bins = std::make_unique<pool_bin[]>(num_classes_);
  for (unsigned c = 0; c < num_classes_; ++c) {
    std::size_t const by_bytes = options_.thread_cache_class_bytes / pool_class_size(c);
    cache->bins[c].cap =
        static_cast<std::uint32_t>(std::clamp<std::size_t>(by_bytes, 4, pool_bin_slots));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  cache->stream = &stream_locked(stream);
  ++cache->stream->caches;
  cache->seen_flush = flush_request_.load(std::memory_order_relaxed);
  caches_.push_back(cache);
  cache->pool.store(this);
  return cache;
}

// The retired totals keep what the cache counted, so the pool's statistics still include it.
void pool_state::detach_cache_locked(pool_thread_cache& cache) noexcept {
  retired_live_ += cache.counters.live_bytes.load();
  retired_requested_ += cache.counters.requested_bytes.load();
  retired_allocations_ += cache.counters.allocations.load();
  retired_deallocations_ += cache.counters.deallocations.load();
  caches_.erase(std::remove_if(caches_.begin(), caches_.end(),
                               [&](auto const& c) { return c.get() == &cache; }),
                caches_.end());
  cache.pool.store(nullptr);
}

void pool_state::retire_cache(pool_thread_cache& cache) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_cache_locked(cache);
  // Only this thread may fence its per-thread default stream: what it parked there goes to the
  // extents, fenced, now (or free, if the stream is idle), not at the next device synchronisation.
  // No later thread can name this stream's entry (its key holds this thread's serial): it goes
  // once its memory is free for all.
  if (cache.stream->per_thread) {
    try {
      settle_locked(*cache.stream);
    } catch (std::exception const& e) {
      log(log_level::warn, name() + ": settling a thread's stream at its exit failed: " + e.what());
    }
    cache.stream->retired = true;
  }
  --cache.stream->caches;
  detach_cache_locked(cache);
}

void pool_state::drop_cache(pool_thread_cache& cache) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cache.pool.load() != this) return;
  flush_cache_locked(cache);
  pool_stream& s = *cache.stream;
  if (s.released.load(std::memory_order_relaxed)) {
    // release_stream() synchronised the stream after everything freed on it (its contract: no
    // frees on the stream after it): the cache's blocks are idle and go to every stream now. The
    // stream may be destroyed by now: it must not be queried.
    drain_class_lists_locked(s);
    complete_all_fences_locked(s, cut_epoch_locked(s));
  }
  --s.caches;
  detach_cache_locked(cache);
  reap_retired_locked();
}

void pool_state::reuse_released(pool_thread_cache& cache) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  cache.stream->released.store(false, std::memory_order_relaxed);
}

void pool_state::track_allocate(void* ptr, std::size_t size, std::size_t requested, stream_handle) {
  std::lock_guard<std::mutex> lock(tracking_mutex_);
  auto const [it, fresh] =
      tracked_.emplace(reinterpret_cast<std::uintptr_t>(ptr), tracked_block{size, requested});
  if (!fresh)
    throw logic_error(name() + ": handed out " + pool_hex(it->first) + " twice (internal error)");
}

bool pool_state::track_deallocate(void* ptr, std::size_t size, std::size_t requested) noexcept {
  std::lock_guard<std::mutex> lock(tracking_mutex_);
  auto it = tracked_.find(reinterpret_cast<std::uintptr_t>(ptr));
  std::string problem;
  if (it == tracked_.end())
    problem = "is not allocated (double free or foreign pointer)";
  else if (it->second.size != size)
    problem = "was allocated with " + std::to_string(it->second.requested) + " bytes, freed with " +
              std::to_string(requested);
  if (!problem.empty()) {
    invalid_deallocations_.fetch_add(1);
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
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& entry : streams_)
    drain_class_lists_locked(*entry.second);
  for (auto& entry : streams_)
    settle_locked(*entry.second);
  poll_locked();
  std::size_t const trimmed = trim_locked();
  reap_retired_locked();
  return trimmed;
}

// close(): everything the pool can release goes while the device's context is alive; nothing of
// the pool touches the device afterwards but the destructor's chunk give-back (give_back mode).
void pool_state::close(pool_live_chunks live) {
  if (is_closed()) return;
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
    ++synchronizations_;
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
  std::lock_guard<std::mutex> lock(mutex_);
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

void pool_state::release_stream(stream_handle stream) {
  flush_calling_thread();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_stream& s = stream_locked(stream);
    drain_class_lists_locked(s);
    std::uint64_t const upto = cut_epoch_locked(s);
    backend_.synchronize_stream(stream);
    ++synchronizations_;
    complete_all_fences_locked(s, upto);
    // The null and per-thread default streams are never destroyed: only a created stream's entry
    // is retired (its id names no later stream, so the entry would never be used again).
    if (s.key.which == pool_stream_key::kind::created)
      s.released.store(true, std::memory_order_relaxed);
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
  std::int64_t live = static_cast<std::int64_t>(large_live_) + retired_live_;
  std::int64_t requested = static_cast<std::int64_t>(large_requested_) + retired_requested_;
  std::int64_t cached = 0;
  st.allocations = large_allocations_ + retired_allocations_;
  st.deallocations = large_deallocations_ + retired_deallocations_;
  for (auto const& cache : caches_) {
    live += cache->counters.live_bytes.load(std::memory_order_relaxed);
    requested += cache->counters.requested_bytes.load(std::memory_order_relaxed);
    cached += cache->counters.cached_bytes.load(std::memory_order_relaxed);
    st.allocations += cache->counters.allocations.load(std::memory_order_relaxed);
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
  st.events_recorded = events_recorded_;
  st.events_completed = events_completed_;
  st.synchronizations = synchronizations_;
  st.upstream_allocations = upstream_allocations_;
  st.upstream_deallocations = upstream_deallocations_;
  st.invalid_deallocations = invalid_deallocations_.load();
  st.lock_acquisitions = lock_acquisitions_;
  st.reclaims = reclaims_;
  st.pages_mapped = pages_mapped_;
  st.pages_unmapped = pages_unmapped_;
  st.streams = streams_.size();
  return st;
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
