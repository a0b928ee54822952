// pool_resource's back end: batches between thread caches and the per-stream class lists (refill,
// carve, overflow, flush) and the lifetimes of thread caches. The large-size path is in
// pool_large_path.cpp, the whole-pool operations in pool_operations.cpp, the extents in
// pool_state.cpp and pool_obtain.cpp, fences in pool_fences.cpp, growth in pool_growth.cpp and
// pool_range.cpp.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>

namespace gpumem::detail {

namespace {

// A stream merges all of its class lists back, under its own lock, at most this often between two
// growths it makes.
constexpr std::uint64_t pool_full_drains_per_growth = 8;

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
    std::lock_guard<pool_lock> arena(s.mutex);
    auto& list = s.class_lists[cls];
    s.class_used[cls] = s.misses;
    while (got < want && !list.empty()) {
      bin.slots[bin.count++] = list.back();
      list.pop_back();
      ++got;
    }
    s.remove_listed(got * size, merged_class(cls));
    s.note_refill();
    if (got == 0) got = carve_own_held(cache, cls, want);
  }
  if (got == 0) got = carve_batch(cache, cls, want);
  pool_bump(cache.counters.cached_bytes, got * size);
  if (s.fence_wanted.load(std::memory_order_relaxed)) fence_as_wanted(s);
}

void pool_state::fence_as_wanted(pool_stream& s) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.lock_acquisitions;
  fence_or_warn_locked(s, 0);  // clears the flag
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
    pool_extent_entry* const fit = own.best_fit_batch(size, want);
    if (fit == nullptr) return 0;
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, fit->second.size / size));
    bin.push_run(own.take(*fit, n * size), n, size);
    return n;
  };
  if (std::uint32_t n = carve()) return n;
  // A block of a larger class of this stream, cut into blocks of this class; the rest goes to the
  // stream's extents. Cheaper than draining lists to find a fit. The rest's extent node is made
  // ready first, so that handing it back cannot fail once the block is cut.
  bool node_ready = true;
  try {
    own.reserve_node();
  } catch (std::bad_alloc const&) {
    node_ready = false;
  }
  split_block const split = node_ready ? split_larger_held(cls, s) : split_block{0, 0};
  if (split.base != 0) {
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, split.size / size));
    bin.push_run(split.base, n, size);
    if (split.size > n * size) {
      std::shared_lock<std::shared_mutex> chunks(chunks_mutex_);
      std::uintptr_t const rest = split.base + n * size;
      if (!give_back_held(reinterpret_cast<void*>(rest), split.size - n * size, s))
        note_lost(rest, split.size - n * size);  // the node is ready: cannot happen
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
  ++counts_.lock_acquisitions;
  pool_bin& bin = cache.bins[cls];
  pool_stream& s = *cache.stream;
  std::size_t const size = pool_class_size(cls);
  // A slab of the free extents for the stream's arena: the batch, and with it up to
  // pool_slab_bytes for the stream's next carves, made under its lock alone.
  if (pool_extent_entry* const fit = free_.best_fit_batch(size, want)) {
    auto const n = static_cast<std::uint32_t>(std::min<std::size_t>(want, fit->second.size / size));
    std::uintptr_t base = 0;
    {
      std::lock_guard<pool_lock> arena(s.mutex);
      base = take_slab_held(*fit, n * size, pool_slab_bytes, s);
    }
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
    s.remove_listed(block.size, merged_class(c));
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
    std::lock_guard<pool_lock> lists(s.mutex);
    auto& list = s.class_lists[cls];
    s.class_used[cls] = s.misses;
    list.reserve(list.size() + move);
    for (std::uint32_t i = 0; i < move; ++i)
      list.push_back(bin.slots[--bin.count]);
    s.add_listed(move * size, merged_class(cls));
    bound_merged_lists_held(s);
  } catch (...) {
    // No memory for the list: hand the blocks to the extents instead; those that cannot go there
    // either stay in the bin, but one slot must come free for the block being freed.
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.lock_acquisitions;
    std::uint32_t moved = 0;
    while (moved < move && give_back_locked(bin.slots[bin.count - 1], size, s)) {
      --bin.count;
      ++moved;
    }
    if (moved == 0) {
      note_lost(reinterpret_cast<std::uintptr_t>(bin.slots[bin.count - 1]), size);
      --bin.count;
      ++moved;
    }
    after_give_back_locked(s, options_.fence_bytes);
    pool_bump(cache.counters.cached_bytes, -static_cast<std::int64_t>(moved * size));
    return;
  }
  pool_bump(cache.counters.cached_bytes, -static_cast<std::int64_t>(move * size));
  if (s.fence_wanted.load(std::memory_order_relaxed)) fence_as_wanted(s);
}

void pool_state::flush_cache_locked(pool_thread_cache& cache) noexcept {
  pool_stream& s = *cache.stream;
  std::int64_t moved_bytes = 0;
  std::unique_lock<pool_lock> lists(s.mutex);
  for (unsigned c = 0; c < cache.num_classes; ++c) {
    pool_bin& bin = cache.bins[c];
    std::size_t const size = pool_class_size(c);
    while (bin.count > 0) {
      void* p = bin.slots[bin.count - 1];
      try {
        s.class_lists[c].push_back(p);
        s.add_listed(size, merged_class(c));
      } catch (...) {
        // No memory for the list: to the extents, else the block stays cached.
        lists.unlock();  // give_back_locked takes the stream's lock itself
        bool const taken = give_back_locked(p, size, s);
        lists.lock();
        if (!taken) break;
      }
      --bin.count;
      moved_bytes += static_cast<std::int64_t>(size);
    }
  }
  bound_merged_lists_held(s);
  pool_bump(cache.counters.cached_bytes, -moved_bytes);
}

// --- thread caches -------------------------------------------------------------------------------

std::shared_ptr<pool_thread_cache> pool_state::make_cache(stream_handle stream) {
  auto cache = std::make_shared<pool_thread_cache>();
  cache->num_classes = num_classes_;
  cache->bins = std::make_unique<pool_bin[]>(num_classes_);
  for (unsigned c = 0; c < num_classes_; ++c) {
    std::size_t const size = pool_class_size(c);
    cache->bins[c].cap = static_cast<std::uint32_t>(
        merged_class(c)
            ? std::max<std::size_t>(
                  1, std::min(options_.thread_cache_class_bytes, pool_merged_bin_bytes) / size)
            : std::clamp<std::size_t>(options_.thread_cache_class_bytes / size, 4, pool_bin_slots));
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
  // What a flush could not place for want of host memory goes with the cache.
  for (unsigned c = 0; c < cache.num_classes; ++c)
    for (pool_bin& bin = cache.bins[c]; bin.count > 0; --bin.count)
      note_lost(reinterpret_cast<std::uintptr_t>(bin.slots[bin.count - 1]), pool_class_size(c));
  counts_.retired_live += cache.counters.live_bytes.load();
  counts_.retired_requested += cache.counters.requested_bytes.load();
  counts_.retired_allocations += cache.counters.allocations.load();
  counts_.retired_deallocations += cache.counters.deallocations.load();
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
      settle_locked(*cache.stream, cache.stream);
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

}  // namespace gpumem::detail
