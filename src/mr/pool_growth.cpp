// pool_state: growth from the upstream, trim, and the out-of-memory report (see pool_state.hpp).
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>
#include <limits>
#include <sstream>

namespace gpumem::detail {

namespace {

// Growth takes at least chunk_size, and otherwise the request rounded to this step.
constexpr std::size_t growth_rounding = 2 * MiB;
// Trims before a growth that must find a chunk unused before it goes back.
constexpr std::uint32_t pool_trim_sightings = 2;
// A chunked pool's growth step is at least the largest block it has grown for lately (in the last
// pool_growth_floor_period to twice that many growths), up to this many chunk_size.
constexpr std::size_t pool_growth_floor_chunks = 8;
constexpr std::uint64_t pool_growth_floor_period = 16;

}  // namespace

// --- growth and trim -----------------------------------------------------------------------------

std::size_t pool_state::growth_step_locked() const noexcept {
  // Every stream that came short since the last growth will want a slab or a block of the free
  // extents again soon: a growth that leaves room for all of them spares their next misses an
  // upstream call each (cudaMalloc calls made at once wait for each other in the driver: 2.7 ms
  // each with 16 threads growing, 0.15 ms alone), and the slack keeps their arenas from merging
  // and carving the same memory over and over. Nothing makes a short stream wait for a growth in
  // flight: it grows too. A pool used from one stream grows by chunk_size as before.
  std::size_t short_streams = 0;
  for (auto const& entry : streams_)
    short_streams += entry.second->short_at_growth == counts_.upstream_allocations ? 1 : 0;
  std::size_t const chunk = stream_growth_step_locked();
  if (short_streams <= 1) return chunk;
  // Streams short at once may each grow at once (the upstream's call runs without the mutex), so
  // a step is also held to the pool's share per stream: together they at most double the pool,
  // and a small pool (a few blocks per stream) grows by chunk_size.
  std::size_t const share =
      std::max(chunk, held_ / streams_.size() / growth_rounding * growth_rounding);
  std::size_t const wanted = chunk > std::numeric_limits<std::size_t>::max() / short_streams
                                 ? share
                                 : chunk * short_streams;
  return std::min(wanted, share);
}

std::size_t pool_state::stream_growth_step_locked() const noexcept {
  // A young pool grows by half of what it holds (2 MiB at first), up to chunk_size: a workload
  // of a few MiB holds a few MiB, and a large one reaches chunk_size steps in a few growths.
  std::size_t const young = std::min(
      chunk_bytes(), std::max(growth_rounding, held_ / 2 / growth_rounding * growth_rounding));
  if (vrange_ != nullptr) return young;  // one range: no chunk boundary splits its memory
  // Chunks are never merged: a chunk smaller than the largest block the pool has grown for cannot
  // serve such a block, so a trim before the next such growth gives it back and a growth for the
  // next smaller blocks takes another (with 16 threads on blocks of 1-64 MiB, 11-187 upstream
  // frees per run, each a cudaFree that waits for the device). Chunks at least that large, up to
  // pool_growth_floor_chunks × chunk_size, serve every block of the workload: on an H100, 16
  // threads, that trace made no upstream free in a timed run and ran 1.2-1.7x faster. The floor
  // follows the blocks of the last growths (and trim() clears it): a pool that once grew for a
  // large block and now serves small ones steps by half of what it holds again.
  std::size_t const most =
      chunk_bytes() > std::numeric_limits<std::size_t>::max() / 2 / pool_growth_floor_chunks
          ? std::numeric_limits<std::size_t>::max() / 2
          : chunk_bytes() * pool_growth_floor_chunks;
  return std::max(young, pool_round_up_to(std::min(growth_floor_, most), growth_rounding));
}

void pool_state::note_growth_request_locked(std::size_t need) noexcept {
  growth_floor_ = std::max(growth_floor_, need);
  growth_floor_next_ = std::max(growth_floor_next_, need);
  if (counts_.upstream_allocations % pool_growth_floor_period == 0) {
    growth_floor_ = growth_floor_next_;
    growth_floor_next_ = 0;
  }
}

bool pool_state::grow(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream* s) {
  scoped_device const on_device(backend_, device_);  // the upstream allocates on the current one
  if (vrange_ != nullptr && grow_range(lock, size, s)) return true;
  std::size_t const need = pool_round_up(size);
  std::size_t const taken = held_ + growing_;  // growing_: other threads' growth in flight
  if (taken > options_.maximum_size || options_.maximum_size - taken < need) {
    growth_refused_ = true;
    return false;
  }
  std::size_t const room = options_.maximum_size - taken;
  std::size_t const fitted = std::min(pool_round_up_to(need, growth_rounding), room);
  std::size_t const preferred = std::min(std::max(growth_step_locked(), fitted), room);
  // Refused (the device nearly full): one chunk, then the request alone.
  std::size_t const one_chunk = std::min(std::max(chunk_bytes(), fitted), preferred);
  // The upstream's call (a cudaMalloc takes tens to hundreds of microseconds) runs without the
  // pool's mutex; the bytes are counted in growing_ meanwhile, so that concurrent growth respects
  // the maximum size.
  // Chunks are taken on a stream of the pool's own, created non-blocking: waiting for a
  // stream-ordered upstream there waits for nothing else (the legacy default stream would wait for
  // the work of every blocking stream, per-thread default streams included).
  if (growth_stream_ == nullptr) growth_stream_ = backend_.create_stream(true);
  stream_handle const order = growth_stream_;
  growing_ += preferred;
  lock.unlock();
  void* p = nullptr;
  std::size_t got = 0;
  try {
    std::size_t refused = 0;  // the last size refused: the attempts only shrink, never repeat
    for (std::size_t attempt : {preferred, one_chunk, fitted, need}) {
      if (attempt < need || attempt == refused) continue;
      refused = attempt;
      try {
        p = upstream_.allocate(attempt, order);
      } catch (out_of_memory const&) {
        continue;
      }
      if (p == nullptr) continue;
      got = attempt;
      break;
    }
    // The chunk is used from every stream: make sure a stream-ordered upstream has finished.
    if (p != nullptr) backend_.synchronize_stream(order);
  } catch (...) {
    if (p != nullptr) upstream_.deallocate(p, got, order);
    lock.lock();
    growing_ -= preferred;
    growth_done_.notify_all();
    throw;
  }
  lock.lock();
  growing_ -= preferred;
  growth_done_.notify_all();  // the waiters need the mutex: they see the chunk added below
  if (p == nullptr) {
    growth_refused_ = true;
    return false;
  }
  if (s != nullptr) note_growth_request_locked(need);  // not initial_size
  auto const base = reinterpret_cast<std::uintptr_t>(p);
  try {
    std::unique_lock<std::shared_mutex> chunks(chunks_mutex_);
    pool_chunk& chunk = chunks_.try_emplace(base).first->second;
    chunk.base = base;
    chunk.size = got;
    chunks.unlock();
    add_extent(free_, base, got, 0, &chunk);
  } catch (...) {
    std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
    chunks_.erase(base);
    upstream_.deallocate(p, got, nullptr);
    throw;
  }
  note_growth_locked(got);
  return true;
}

void pool_state::trim_unlocked(std::unique_lock<std::mutex>& lock, pool_stream* stream) {
  scoped_device const on_device(backend_, device_);  // before any chunk leaves the pool
  std::vector<pool_retired_chunk> later;
  if (trim_locked(stream, false, &later) == 0) return;
  lock.unlock();
  for (auto const& chunk : later)
    upstream_.deallocate(chunk.ptr, chunk.size, chunk.order);
  lock.lock();
}

void pool_state::note_growth_locked(std::size_t bytes) noexcept {
  held_ += bytes;
  held_hint_.store(held_, std::memory_order_relaxed);
  peak_held_ = std::max(peak_held_, held_);
  misses_since_growth_ = 0;
  reclaims_since_growth_ = 0;
  growth_refused_ = false;
  // A stream is quiet until it allocates again.
  for (auto& entry : streams_)
    entry.second->refills_seen = entry.second->refills.load(std::memory_order_relaxed);
  ++counts_.upstream_allocations;
}

bool pool_state::wholly_free_locked(pool_chunk const& chunk, pool_stream* stream) noexcept {
  std::uintptr_t const end = chunk.base + chunk.size;
  for (std::uintptr_t at = chunk.base; at < end;) {
    auto e = free_.find_start(at);
    if (e == free_.extents().end() || e->second.chunk != &chunk) {
      if (stream == nullptr) return false;
      e = stream->extents.find_start(at);
      if (e == stream->extents.extents().end() || e->second.chunk != &chunk) return false;
    }
    at += e->second.size;
  }
  return true;
}

bool pool_state::erase_cover_locked(pool_chunk const& chunk, pool_stream* stream) noexcept {
  bool owned = false;
  std::uintptr_t const end = chunk.base + chunk.size;
  for (std::uintptr_t at = chunk.base; at < end;) {
    auto e = free_.find_start(at);
    if (e != free_.extents().end() && e->second.chunk == &chunk) {
      at += e->second.size;
      free_.erase(e);
      continue;
    }
    e = stream->extents.find_start(at);  // wholly_free_locked found it there
    at += e->second.size;
    stream->extents.erase(e);
    owned = true;
  }
  return owned;
}

std::size_t pool_state::trim_locked(pool_stream* stream, bool shrink_range,
                                    std::vector<pool_retired_chunk>* later) {
  scoped_device const on_device(backend_, device_);
  // An expandable pool's free pages (a growth moves them itself: pool_range.cpp).
  std::size_t released = shrink_range ? shrink_range_locked() : 0;
  if (later == nullptr) {
    for (auto it = chunks_.begin(); it != chunks_.end();) {
      pool_chunk& chunk = (it++)->second;  // the chunk may go: step past it first
      released += trim_chunk_locked(chunk, stream, nullptr);
    }
    return released;
  }
  // Before a growth (which may come every few misses of a busy pool): only a chunk with a free
  // extent, or one of `stream`'s, at its base can be wholly free, and those are found by one walk
  // over the extents instead of a look at every chunk (a pool of tens of GiB in 32 MiB chunks has
  // about a thousand, most of them in use). Without memory for that list, no chunk goes back now.
  std::vector<pool_chunk*> candidates;
  try {
    auto const collect = [&](pool_extent_set const& set) {
      for (auto const& entry : set.extents()) {
        pool_extent const& e = entry.second;
        if (e.chunk != nullptr && e.start == e.chunk->base && !e.chunk->mapped)
          candidates.push_back(e.chunk);
      }
    };
    collect(free_);
    if (stream != nullptr) {
      std::lock_guard<pool_lock> arena(stream->mutex);
      collect(stream->extents);
    }
    later->reserve(later->size() + candidates.size());  // no push_back below can fail
  } catch (std::bad_alloc const&) {
    return released;
  }
  for (pool_chunk* chunk : candidates)
    released += trim_chunk_locked(*chunk, stream, later);
  return released;
}

std::size_t pool_state::trim_chunk_locked(pool_chunk& chunk, pool_stream* stream,
                                          std::vector<pool_retired_chunk>* later) {
  if (chunk.mapped) return 0;  // the range: shrink_range_locked
  // The chunk is wholly free: extents free for every stream and, when `stream` is given, extents
  // of that stream (given back in that stream's order: the upstream's contract makes it wait for,
  // or order after, the work queued there before the frees). A chunk is often split between the
  // two: a growth adds it to the free extents, the stream carves a block from it and frees the
  // block into its own extents, next to the rest still free, and the two are never merged (they
  // have different owners). A chunk in use has a gap in that cover.
  std::unique_lock<pool_lock> arena;
  if (stream != nullptr) arena = std::unique_lock<pool_lock>(stream->mutex);
  if (!wholly_free_locked(chunk, stream)) return 0;
  // Before a growth, a chunk goes back at the second trim that finds it unused: a chunk that the
  // loop's current phase left free is often what its next phase takes again, and giving it back
  // at once would cost a cudaFree now and a cudaMalloc then, on many rounds of the loop. Measured
  // on the host (one thread, the large trace, five passes: held / peak live, upstream allocations
  // + frees): at the first sighting 1.34, 296; at the second 1.33, 131; at the second of two trims
  // in a row 1.35, 131; at the second with no block carved from the chunk in between 1.45, 98.
  if (later != nullptr && ++chunk.unused_sightings < pool_trim_sightings) return 0;
  stream_handle const order =
      erase_cover_locked(chunk, stream) && stream != nullptr ? stream->handle : nullptr;
  arena = {};
  void* const ptr = reinterpret_cast<void*>(chunk.base);
  std::size_t const size = chunk.size;
  if (later != nullptr)
    later->push_back({ptr, size, order});
  else
    upstream_.deallocate(ptr, size, order);
  held_ -= size;
  held_hint_.store(held_, std::memory_order_relaxed);
  ++counts_.upstream_deallocations;
  std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
  chunks_.erase(reinterpret_cast<std::uintptr_t>(ptr));
  return size;
}

void pool_state::throw_out_of_memory_locked(std::size_t size) {
  std::size_t const largest = free_.largest();
  std::size_t const free_bytes = free_.bytes();
  std::size_t owned = 0;
  std::size_t listed = 0;
  for (auto& entry : streams_) {
    owned += entry.second->extents.bytes();
    listed += entry.second->class_list_bytes.load();
  }
  std::size_t cached = 0;
  for (auto& cache : caches_)
    cached +=
        static_cast<std::size_t>(std::max<std::int64_t>(0, cache->counters.cached_bytes.load()));
  double const fragmentation =
      free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(free_bytes);
  std::ostringstream detail;
  detail << "requested " << format_bytes(size) << "; held " << format_bytes(held_) << " in "
         << chunks_.size() << " chunks (maximum ";
  if (options_.maximum_size == std::numeric_limits<std::size_t>::max())
    detail << "unlimited";
  else
    detail << format_bytes(options_.maximum_size);
  detail << "); largest free block " << format_bytes(largest) << "; free "
         << format_bytes(free_bytes) << " in " << free_.count() << " extents, fragmentation "
         << static_cast<int>(fragmentation * 100.0 + 0.5)
         << "% (1 - largest/free); waiting on streams " << format_bytes(owned + listed)
         << "; in thread caches " << format_bytes(cached);
  throw out_of_memory(size, name(), held_, peak_held_, detail.str());
}

}  // namespace gpumem::detail
