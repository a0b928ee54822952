// pool_resource's large-size path (see pool_state.hpp): blocks above max_cached_size, carved from
// and freed to the calling thread's stream's own extents, checked against the table of live large
// blocks, fenced in batches.
#include "pool_state.hpp"

#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <chrono>

namespace gpumem::detail {

namespace {

// The large path's fences on one stream pending before that stream polls them itself.
constexpr std::size_t pool_large_fences_polled = 8;

}  // namespace

// --- the large path ------------------------------------------------------------------------------
// A block above max_cached_size is carved from the calling thread's stream's own extents under
// that stream's lock alone, and handed back there the same way: with one thread per stream, a
// large allocate+free pair meets no other thread. Only a miss takes the pool's mutex (obtain).
// Frees are fenced in batches (large_fence_bytes), never one event per block.

void* pool_state::take_large_own(pool_thread_cache& cache, std::size_t size) noexcept {
  pool_stream& s = *cache.stream;
  std::lock_guard<pool_lock> arena(s.mutex);
  if (s.extents.empty()) return nullptr;
  pool_extent_entry* const fit = s.extents.best_fit(size);
  if (fit == nullptr) return nullptr;
  std::uintptr_t const addr = fit->second.start;  // take() cuts from the start
  try {
    large_blocks_.insert(addr, {size, fit->second.chunk});
  } catch (std::bad_alloc const&) {
    return nullptr;  // nothing changed: the shared path tries (and reports) it
  }
  s.extents.take(*fit, size);
  s.net_returned -= static_cast<std::int64_t>(size);
  s.note_refill();  // the stream is allocating: not quiet
  return reinterpret_cast<void*>(addr);
}

bool pool_state::check_large_free(std::uintptr_t addr, std::size_t size,
                                  pool_chunk*& chunk) noexcept {
  switch (large_blocks_.remove(addr, size, chunk)) {
    case pool_large_blocks::outcome::removed:
      return true;
    case pool_large_blocks::outcome::not_live:
      refuse_deallocation(addr, size,
                          "not a live block of this pool (double free or foreign pointer)");
      break;
    case pool_large_blocks::outcome::wrong_size:
      refuse_deallocation(addr, size, "the block was allocated with another size");
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
    std::lock_guard<pool_lock> arena(s.mutex);
    // The range's chunk of an expandable pool changes size under chunks_mutex_: read it under it.
    std::shared_lock<std::shared_mutex> chunks(chunks_mutex_, std::defer_lock);
    if (vrange_ != nullptr) chunks.lock();
    try {
      if (!add_extent(s.extents, addr, size, s.epoch, chunk)) {
        refuse_deallocation(addr, size);  // lies on free memory (add_extent logged it)
        return own_free::refused;
      }
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
    // large_fence_bytes of that excess, so that others can use it, and so is one whose memory
    // another stream wanted since its last fence. With a single stream nobody waits for a fence.
    fence = (s.net_returned >= static_cast<std::int64_t>(large_fence_bytes()) ||
             s.fence_wanted.load(std::memory_order_relaxed)) &&
            stream_count_.load(std::memory_order_relaxed) > 1;
  }
  if (fence) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.lock_acquisitions;
    fence_large_locked(s);
  }
  return own_free::taken;
}

void pool_state::fence_large_locked(pool_stream& s) noexcept {
  if (streams_.size() < 2 || !fenceable(s)) return;
  fence_or_warn_locked(s, pool_large_fences_polled);
}

namespace {

using lock_clock = std::chrono::steady_clock;

std::uint64_t nanoseconds_since(lock_clock::time_point start) noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(lock_clock::now() - start).count());
}

// Adds the time from its construction (just after the mutex was taken) to its destruction (before
// the mutex is released) to a counter guarded by that mutex.
struct hold_timer {
  std::uint64_t& total;
  lock_clock::time_point const since = lock_clock::now();
  hold_timer(hold_timer const&) = delete;
  hold_timer& operator=(hold_timer const&) = delete;
  ~hold_timer() { total += nanoseconds_since(since); }
};

}  // namespace

void* pool_state::allocate_large(std::size_t size, std::size_t requested, stream_handle stream) {
  void* p = nullptr;
  {
    auto const asked = lock_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    counts_.large_lock_wait_ns += nanoseconds_since(asked);
    hold_timer const held{counts_.large_lock_hold_ns};
    ++counts_.lock_acquisitions;
    pool_stream& s = stream_locked(stream);
    {
      std::lock_guard<pool_lock> arena(s.mutex);
      s.note_refill();
    }
    p = obtain(lock, size, s);
    if (requested > options_.max_cached_size) {
      auto const addr = reinterpret_cast<std::uintptr_t>(p);
      try {
        large_blocks_.insert(addr, {size, chunk_of(addr)});
      } catch (...) {
        if (!give_back_locked(p, size, s)) note_lost(addr, size);
        throw;
      }
    }
    counts_.large_live += size;
    counts_.large_requested += requested;
    ++counts_.large_allocations;
  }
  if (options_.track_blocks) track_allocate(p, size, requested, stream);
  return p;
}

void pool_state::deallocate_large(void* ptr, std::size_t size, std::size_t requested,
                                  stream_handle stream) noexcept {
  auto const asked = lock_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.large_lock_wait_ns += nanoseconds_since(asked);
  hold_timer const held{counts_.large_lock_hold_ns};
  ++counts_.lock_acquisitions;
  pool_stream* s = nullptr;
  try {
    s = &stream_locked(stream);
  } catch (std::exception const& e) {
    report_refused_deallocation();  // the block stays live: nothing was freed
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
    return;  // refused (and reported) by the check
  if (!give_back_locked(ptr, size, *s)) note_lost(reinterpret_cast<std::uintptr_t>(ptr), size);
  counts_.large_live -= size;
  counts_.large_requested -= requested;
  ++counts_.large_deallocations;
  if (s->retired) {
    // Freed by an exiting thread after its stream was settled (from a later thread_local
    // destructor): the last moment its per-thread stream can be fenced.
    fence_or_warn_locked(*s, no_poll);
    return;
  }
  after_give_back_locked(*s, large_fence_bytes());
}

}  // namespace gpumem::detail
