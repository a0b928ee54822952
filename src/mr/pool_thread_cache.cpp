// The front end of pool_resource: per-thread, per-pool, per-stream stacks of free blocks by size
// class. The common allocate/deallocate touches only the calling thread's stack: no lock and no
// atomic read-modify-write (the counters are owner-written relaxed stores).
//
// Lifetime: a thread's caches live in a thread_local table; the pool also holds them (to flush
// them, count them and validate). At thread exit the table hands every cache back to its pool if
// the pool still exists; the registry mutex orders that against the pool's destructor, which
// marks its caches dead. Pool ids are never reused, so a dead entry is never matched again.
//
// The last lookup is remembered in three trivially-typed thread_locals with the initial-exec TLS
// model: reading them is one fs-relative load, where the table (a thread_local with a destructor,
// in a shared library) costs a __tls_get_addr call and an initialisation check on every access.
#include "pool_state.hpp"

#include <algorithm>

#include <gpumem/core/config.hpp>
#include <gpumem/core/logging.hpp>

namespace gpumem::detail {

namespace {

struct tls_entry {
  std::uint64_t pool_id;
  pool_stream_key stream;
  std::shared_ptr<pool_thread_cache> cache;
};

struct tls_table {
  std::vector<tls_entry> entries;

  ~tls_table();
};

thread_local tls_table tls;

// The last (pool, stream key) looked up by this thread, and its cache. Pool ids start at 1.
GPUMEM_TLS_INITIAL_EXEC thread_local std::uint64_t last_id = 0;
GPUMEM_TLS_INITIAL_EXEC thread_local pool_stream_key last_stream{};
GPUMEM_TLS_INITIAL_EXEC thread_local pool_thread_cache* last_cache = nullptr;
// Set once the table has been destroyed at thread exit: destructors of other thread_locals that
// run later and free pool memory then use the shared structures.
GPUMEM_TLS_INITIAL_EXEC thread_local bool table_gone = false;

tls_table::~tls_table() {
  last_id = 0;
  last_cache = nullptr;
  table_gone = true;
  std::lock_guard<std::mutex> registry(pool_registry_mutex());
  for (auto& entry : entries)
    if (pool_state* pool = entry.cache->pool.load()) pool->retire_cache(*entry.cache);
}

pool_thread_cache* remember(std::uint64_t id, pool_stream_key stream, pool_thread_cache* cache) {
  last_id = id;
  last_stream = stream;
  last_cache = cache;
  return cache;
}

// Drops the calling thread's entries of destroyed pools, and hands back its caches of `pool`'s
// released streams (their ids name no later stream: such a cache would never be used again).
void forget_dead_entries(tls_table& t, pool_state& pool) noexcept {
  auto const dead = [&pool](tls_entry const& e) {
    pool_state* const owner = e.cache->pool.load();
    if (owner == nullptr) return true;
    if (owner != &pool || !e.cache->stream->released.load(std::memory_order_relaxed)) return false;
    pool.drop_cache(*e.cache);
    return true;
  };
  t.entries.erase(std::remove_if(t.entries.begin(), t.entries.end(), dead), t.entries.end());
  last_id = 0;  // the remembered cache may have been one of them
  last_cache = nullptr;
}

// Null once the thread's table is gone (thread exit).
pool_thread_cache* find_or_make(pool_state& pool, stream_handle stream, pool_stream_key key) {
  if (table_gone) return nullptr;
  tls_table& t = tls;
  for (auto& entry : t.entries)
    if (entry.pool_id == pool.id() && entry.stream == key) {
      if (entry.cache->stream->released.load(std::memory_order_relaxed))
        pool.reuse_released(*entry.cache);
      return remember(entry.pool_id, key, entry.cache.get());
    }
  // Forget caches of destroyed pools and released streams before adding one, and the oldest of
  // this pool's when the thread has its fill of them.
  forget_dead_entries(t, pool);
  std::size_t mine = 0;
  for (auto const& entry : t.entries)
    mine += entry.pool_id == pool.id() ? 1 : 0;
  if (mine >= pool_thread_caches_per_pool) {
    // Not the per-thread default stream's: that cache settles the stream at the thread's exit.
    auto const oldest = std::find_if(t.entries.begin(), t.entries.end(), [&](tls_entry const& e) {
      return e.pool_id == pool.id() && !e.cache->stream->per_thread;
    });
    if (oldest != t.entries.end()) {
      pool.drop_cache(*oldest->cache);
      t.entries.erase(oldest);
    }
  }
  t.entries.push_back({pool.id(), key, pool.make_cache(stream)});
  return remember(pool.id(), key, t.entries.back().cache.get());
}

// The fast path also checks that the stream was not released: a stream used again after
// release_stream() must undo the release (so that no other thread treats its blocks as idle).
inline pool_thread_cache* cache_for(pool_state& pool, stream_handle stream) {
  pool_stream_key const key = pool.key_of(stream);
  if (last_id == pool.id() && last_stream == key &&
      !last_cache->stream->released.load(std::memory_order_relaxed))
    return last_cache;
  return find_or_make(pool, stream, key);
}

// A free's lookup. A free on a released stream must not undo the release (only an allocation
// may: release_stream's contract): `released` is set and no cache is returned, and the caller
// completes the free without keeping the stream (pool_state::deallocate_on_released).
//
// The remembered cache is matched by handle, without asking the stream's id (a driver call, which
// other threads' cudaMalloc and cudaFree can hold up). A released entry never matches here (its
// `released` flag stays set: only an allocation that finds the same id clears it), so a free on a
// new stream created at a released one's address asks the id and gets the new stream's cache, as
// an allocation does (cache_for). A stream destroyed without release_stream may leave its address
// to a new stream whose frees then reach the old entry this way: the entry's next fence asks the
// id and marks it stale (pool_fences.cpp), after which it never matches here either.
pool_thread_cache* cache_for_free(pool_state& pool, stream_handle stream, bool& released) {
  if (last_id == pool.id() && last_cache->stream->handle == stream &&
      !last_cache->stream->released.load(std::memory_order_relaxed) &&
      !last_cache->stream->stale.load(std::memory_order_relaxed))
    return last_cache;
  pool_stream_key const key = pool.key_of(stream);
  if (!table_gone)
    for (auto& entry : tls.entries)
      if (entry.pool_id == pool.id() && entry.stream == key) {
        if (entry.cache->stream->released.load(std::memory_order_relaxed)) {
          released = true;
          return nullptr;
        }
        return remember(entry.pool_id, key, entry.cache.get());
      }
  if (pool.is_released(key)) {
    released = true;
    return nullptr;
  }
  return find_or_make(pool, stream, key);
}

}  // namespace

bool pool_thread_exiting() noexcept {
  return table_gone;
}

std::size_t pool_state::flush_calling_thread_locked() noexcept {
  std::size_t flushed = 0;
  if (table_gone) return 0;
  for (auto& entry : tls.entries)
    if (entry.pool_id == id_) {
      flushed += static_cast<std::size_t>(entry.cache->counters.cached_bytes.load());
      flush_cache_locked(*entry.cache);
      entry.cache->seen_flush = flush_request_.load(std::memory_order_relaxed);
    }
  return flushed;
}

void pool_state::drop_released_caches_of_calling_thread() noexcept {
  if (table_gone) return;
  forget_dead_entries(tls, *this);
}

void pool_state::flush_calling_thread() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_calling_thread_locked();
}

// The calling thread's cache for `stream`, or null when none can be had (no memory, or the thread
// is exiting). A thread that uses its per-thread default stream must settle it when it exits (no
// other thread may record on it): its cache for that stream is what does it. Without one, the
// stream's memory stays its own until a device-wide synchronisation: safe, only slower to reuse.
pool_thread_cache* pool_state::calling_thread_cache(stream_handle stream) noexcept {
  try {
    return cache_for(*this, stream);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": no thread cache (" + e.what() + ")");
    return nullptr;
  }
}

pool_thread_cache* pool_state::calling_thread_cache_for_free(stream_handle stream,
                                                             bool& released) noexcept {
  try {
    return cache_for_free(*this, stream, released);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": no thread cache (" + e.what() + ")");
    return nullptr;
  }
}

void* pool_state::allocate(std::size_t bytes, stream_handle stream) {
  if (bytes > options_.max_cached_size) {
    std::size_t const size = pool_round_up(bytes);
    pool_thread_cache* const cache = calling_thread_cache(stream);
    void* const p = cache != nullptr ? take_large_own(*cache, size) : nullptr;
    if (p == nullptr) return allocate_large(size, bytes, stream);
    pool_bump(cache->counters.live_bytes, size);
    pool_bump(cache->counters.requested_bytes, bytes);
    pool_bump(cache->counters.allocations, 1);
    if (options_.track_blocks) {
      try {
        track_allocate(p, size, bytes, stream);
      } catch (...) {
        give_back_large_own(*cache, p, size);
        pool_bump(cache->counters.live_bytes, -static_cast<std::int64_t>(size));
        pool_bump(cache->counters.requested_bytes, -static_cast<std::int64_t>(bytes));
        pool_bump(cache->counters.allocations, -1);
        throw;
      }
    }
    return p;
  }
  unsigned const cls = pool_size_class(bytes);
  pool_thread_cache* const found = cache_for(*this, stream);
  if (found == nullptr) return allocate_uncached(bytes, stream);
  pool_thread_cache& cache = *found;
  if (cache.seen_flush != flush_request_.load(std::memory_order_relaxed)) flush_calling_thread();
  pool_bin& bin = cache.bins[cls];
  if (bin.count == 0) refill(cache, cls);
  void* p = bin.slots[--bin.count];
  std::size_t const size = pool_class_size(cls);
  pool_bump(cache.counters.cached_bytes, -static_cast<std::int64_t>(size));
  pool_bump(cache.counters.live_bytes, size);
  pool_bump(cache.counters.requested_bytes, bytes);
  pool_bump(cache.counters.allocations, 1);
  if (options_.track_blocks) {
    try {
      track_allocate(p, size, bytes, stream);
    } catch (...) {
      bin.slots[bin.count++] = p;
      throw;
    }
  }
  return p;
}

void pool_state::deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  if (closed_.load(std::memory_order_relaxed) != closed_state::open) {
    deallocate_after_close(ptr, bytes);
    return;
  }
  std::size_t const size = block_size(bytes);
  if (options_.track_blocks && !track_deallocate(ptr, bytes)) return;
  bool released = false;
  pool_thread_cache* const cache = calling_thread_cache_for_free(stream, released);
  if (released) {
    deallocate_on_released(ptr, bytes, stream);
    return;
  }
  deallocate_checked(ptr, bytes, size, cache, stream);
}

// A free on a stream given back with release_stream (its block was still live then): the stream
// is synchronised now, the caller's last use of it in the pool, so the block is idle and goes to
// the null stream's arena like any block freed there. Nothing of the pool refers to the stream
// afterwards: it may be destroyed right after this free.
void pool_state::deallocate_on_released(void* ptr, std::size_t bytes,
                                        stream_handle stream) noexcept {
  try {
    scoped_device const on_device(backend_, device_);
    backend_.synchronize_stream(stream);
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": synchronising the released stream of the block " +
                              pool_hex(reinterpret_cast<std::uintptr_t>(ptr)) +
                              " failed: " + e.what() + " (the block is taken back anyway)");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.synchronizations;
  }
  std::size_t const size = block_size(bytes);
  deallocate_checked(ptr, bytes, size, calling_thread_cache(nullptr), nullptr);
}

void pool_state::deallocate_checked(void* ptr, std::size_t bytes, std::size_t size,
                                    pool_thread_cache* cache, stream_handle stream) noexcept {
  bool const cached = bytes <= options_.max_cached_size;
  if (!cached) {
    own_free const done =
        cache != nullptr ? give_back_large_own(*cache, ptr, size) : own_free::elsewhere;
    if (done == own_free::elsewhere) deallocate_large(ptr, size, bytes, stream);
    if (done != own_free::taken) return;
    pool_bump(cache->counters.live_bytes, -static_cast<std::int64_t>(size));
    pool_bump(cache->counters.requested_bytes, -static_cast<std::int64_t>(bytes));
    pool_bump(cache->counters.deallocations, 1);
    return;
  }
  if (large_blocks_.holds(reinterpret_cast<std::uintptr_t>(ptr))) {
    // A live large block (or a pointer into its first granule) freed with a cached size: it would
    // go to a stack and be handed out again while its owner still uses it.
    refuse_deallocation(reinterpret_cast<std::uintptr_t>(ptr), bytes,
                        large_blocks_.live(reinterpret_cast<std::uintptr_t>(ptr))
                            ? "the block was allocated with another size"
                            : "a pointer inside a live block of another size");
    return;
  }
  unsigned const cls = pool_size_class(bytes);
  if (cache == nullptr) {
    // No cache (no memory for one, or the thread is exiting): straight to the shared structures.
    deallocate_uncached(ptr, size, bytes, stream);
    return;
  }
  if (cache->seen_flush != flush_request_.load(std::memory_order_relaxed)) {
    try {
      flush_calling_thread();
    } catch (...) {
    }
  }
  pool_bin& bin = cache->bins[cls];
  if (bin.holds_recent(ptr)) {
    refuse_deallocation(reinterpret_cast<std::uintptr_t>(ptr), bytes,
                        "the block is free already (double free)");
    return;
  }
  if (bin.count == bin.cap) overflow(*cache, cls);
  bin.slots[bin.count++] = ptr;
  pool_bump(cache->counters.cached_bytes, size);
  pool_bump(cache->counters.live_bytes, -static_cast<std::int64_t>(size));
  pool_bump(cache->counters.requested_bytes, -static_cast<std::int64_t>(bytes));
  pool_bump(cache->counters.deallocations, 1);
}

void pool_state::refuse_deallocation(std::uintptr_t addr, std::size_t bytes,
                                     char const* why) noexcept {
  report_refused_deallocation();
  invalid_deallocations_.fetch_add(1, std::memory_order_relaxed);
  if (why == nullptr) return;
  try {
    log(log_level::error, name() + ": deallocate(" + pool_hex(addr) + ", " + std::to_string(bytes) +
                              " B): " + why + "; ignored");
  } catch (...) {  // no memory for the message: the count above still says it
  }
}

// A block of a cached size handed out or taken back without a thread cache goes through the large
// path; its counts are moved to the retired counters, where the sums over all caches expect them.
void* pool_state::allocate_uncached(std::size_t bytes, stream_handle stream) {
  std::size_t const size = pool_class_size(pool_size_class(bytes));
  void* p = allocate_large(size, bytes, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.large_live -= size;
  counts_.large_requested -= bytes;
  --counts_.large_allocations;
  counts_.retired_live += static_cast<std::int64_t>(size);
  counts_.retired_requested += static_cast<std::int64_t>(bytes);
  ++counts_.retired_allocations;
  return p;
}

void pool_state::deallocate_uncached(void* ptr, std::size_t size, std::size_t bytes,
                                     stream_handle stream) noexcept {
  deallocate_large(ptr, size, bytes, stream);
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.large_live += size;
  counts_.large_requested += bytes;
  --counts_.large_deallocations;
  counts_.retired_live -= static_cast<std::int64_t>(size);
  counts_.retired_requested -= static_cast<std::int64_t>(bytes);
  ++counts_.retired_deallocations;
}

}  // namespace gpumem::detail
