// pool_state's fit and slow path for one block (see pool_state.hpp): the best fit over a stream's
// extents and the free ones, the slab a large miss takes, and obtain, which tries everything a
// miss may do before the pool grows (reclaims, orphans, growth, the last resorts). Every function
// named *_locked runs with mutex_ held.
#include "pool_state.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>

namespace gpumem::detail {

namespace {

// After this many misses that had to merge every cache and list back (and then found a fit), the
// next such miss grows the pool instead: see obtain.
constexpr std::uint64_t pool_thrash_misses = 8;
// A miss waits for a synchronisation of orphaned streams until it has run this long, then grows
// (a loaded host takes milliseconds to start its thread; 2 ms let the pool grow at most cycles).
constexpr auto pool_orphan_wait = std::chrono::milliseconds(20);
// Growths in a row one miss makes while other threads take what each growth added (threads that
// share the calling stream carve its extents without the mutex) before it goes on to the
// last resorts.
constexpr int pool_growth_attempts = 4;

}  // namespace

std::uintptr_t pool_state::best_fit_locked(std::size_t size, pool_stream& s) {
  std::lock_guard<pool_lock> arena(s.mutex);
  pool_extent_entry* const own = s.extents.best_fit(size);
  pool_extent_entry* const any = free_.best_fit(size);
  if (own != nullptr && (any == nullptr || own->second.size <= any->second.size))
    return s.extents.take(*own, size);
  if (any == nullptr) return 0;
  return take_slab_held(*any, size,
                        size > options_.max_cached_size ? large_slab_locked(size, s) : size, s);
}

std::uintptr_t pool_state::take_slab_held(pool_extent_entry& free, std::size_t size,
                                          std::size_t slab, pool_stream& s) noexcept {
  std::uintptr_t const base = free.second.start;
  slab = std::min(free.second.size, std::max(size, slab));
  if (slab > size) {
    // The rest goes to the stream first: that insert may fail (then only `size` is taken), the
    // take below cannot.
    try {
      if (add_extent(s.extents, base + size, slab - size, s.epoch, free.second.chunk))
        s.unfenced_bytes += slab - size;
      else
        slab = size;
    } catch (std::exception const&) {
      slab = size;
    }
  }
  free_.take(free, slab);
  return base;
}

std::size_t pool_state::large_slab_locked(std::size_t size, pool_stream const& s) const noexcept {
  // A stream that misses for a large block takes a slab of a free extent, not the block alone:
  // its next blocks come from its own extents under its lock, and streams carving one extent block
  // by block would interleave their blocks, so that what each frees lies in pieces between the
  // others' (too small for its next blocks, never merged). On an H100, 16 threads, bench_alloc
  // --pool-only: the training trace went from 51-67 ns per pair to 40-43 (three runs each).
  // The step (not the extent, nor the share) bounds it: a growth made for several short streams
  // leaves room for the others.
  // In a pool that has no other stream, the stream takes the whole extent: what it frees next to
  // the rest then merges with it (a free extent and a stream's are never merged: their owners
  // differ, and the rest would stay a piece apart from what the stream hands back, too small for a
  // block that the two would hold together). A later stream's miss takes it back from a quiet
  // owner (a reclaim, once the quiet streams park half of the pool). On the host backend, one
  // thread, held / peak live: the training trace 1.19 -> 1.09, the large one 1.35 -> 1.22,
  // PyTorch's replay 1.20 -> 1.14 (the simulated one after its warm replays 1.30 -> 1.21), the
  // inference loop 1.41 -> 1.35 (mean of eight seeds); 4 and 16 threads unchanged within their
  // run-to-run spread.
  // The block goes alone:
  //  * while no other stream allocates, in a pool that has had several (a growth makes every
  //    stream quiet until it allocates again: the growing stream would take the memory grown for
  //    the others that ran short with it; on an H100 a step-sized slab there made the training
  //    trace hold 1.53x its peak instead of 1.41x);
  //  * in an expandable pool (its growth moves pages only from the free extents and the growing
  //    stream's: a slab parked on another stream could not move);
  //  * after a growth failed, and when the pool cannot grow a step more within maximum_size:
  //    memory moved to one stream would only make another's miss reclaim it (a fence, or a wait
  //    for the stream).
  if (vrange_ != nullptr || growth_refused_) return size;
  std::size_t const step = stream_growth_step_locked();
  std::size_t const taken = held_ + growing_;
  if (taken >= options_.maximum_size || options_.maximum_size - taken < step) return size;
  if (streams_.size() == 1) return std::numeric_limits<std::size_t>::max();  // the whole extent
  bool others = false;
  for (auto const& entry : streams_)
    if (entry.second.get() != &s && !quiet(*entry.second)) {
      others = true;
      break;
    }
  if (!others) return size;
  std::size_t const share = held_ / streams_.size();
  return std::max(size, std::min(share, step) / pool_granularity * pool_granularity);
}

// The slow path for one block, with mutex_ held, cheapest and least disruptive first (own_tried:
// the calling thread has just tried the stream's extents and lists under its lock alone):
//   1. memory the calling stream may use at once: its extents and the free ones, a free extent
//      that merged with its own holds the request, its cold class lists (lists it has not used
//      since its previous miss: merging the lists in use would only make it carve them again),
//      extents of any stream whose fences have completed. The stream's own extents stay its own
//      even when it is idle: released to the free ones, they would come back only one slab at a
//      time, each under the mutex;
//   2. (a pool that keeps missing grows instead of merging again: pool_thrash_misses)
//      all of the calling thread's caches and stream's lists;
//   3. a fit in the extents of another stream that is idle on the device (asked after a cut of
//      its epochs, at most pool_idle_queries streams, smallest fit first), among the streams
//      whose handles this call may use (touchable: the calling thread's per-thread stream): that
//      block alone (a cached size: with a slab for the stream's next refills);
//   4. the parked blocks (class lists and extents) of quiet streams, those that have not
//      allocated since the pool last grew, when they are at least half of what the pool holds,
//      at most once per growth (a stream the calling thread may not ask about is asked to fence
//      them in its own next call instead: settle_locked). Taking the blocks of a stream that is
//      still allocating only moves the miss to it (and every thread that needs the mutex waits
//      while its lists are walked): the pool grows instead and each stream keeps what it uses
//      (what a per-stream pool holds), while a stream that only frees what another allocates
//      (producer and consumer) is still drained long before the pool doubles. Asking every
//      stream to fence at every miss instead stripped streams that were still using their
//      extents: an expandable pool, 16 threads on bench_alloc's large trace (an H200), grew on
//      10,766 misses per pass instead of 66, at 23-26 us per pair instead of 0.15-0.18;
//   4b. the memory of orphaned streams (created streams no thread's stack names: done with, or
//      destroyed), once it is a quarter of the pool: one device synchronisation, on a thread of
//      its own, waited for (once per call) until it has run pool_orphan_wait;
//   5. growth (the upstream's call without the mutex), after giving back chunks too small for the
//      request: chunk_size for each stream that came short (past step 1's first fit) since the
//      last growth, up to the pool's share per stream (growth_step_locked), so that the next
//      misses of streams running short together need no upstream call of their own;
//   6. under pressure (growth failed): every stream reclaimed, a device synchronisation, a trim.
void* pool_state::obtain(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream& s,
                         bool own_tried) {
  // The mutex may be released below (growth, trim): `s` must outlive that even if it is retired.
  struct pin {
    pool_stream& s;
    explicit pin(pool_stream& stream) : s(stream) { ++s.pins; }
    ~pin() { --s.pins; }  // the mutex is held again whenever obtain returns or throws
  } const pinned(s);
  // Another stream wanted what this one handed back: only a call made on it may record the fence.
  if (s.fence_wanted.load(std::memory_order_relaxed)) fence_or_warn_locked(s, no_poll);
  if (void* p = fit_locked(size, s)) return p;
  s.short_at_growth = counts_.upstream_allocations;  // counted by the next growth's step
  // Free extents next to the stream's own merge with them: a fit may straddle the two.
  if (adopt_for_fit_locked(s, size))
    if (void* p = fit_locked(size, s)) return p;
  if (!own_tried && s.class_list_bytes.load(std::memory_order_relaxed) > 0) {
    drain_class_lists_locked(s, /*cold_only=*/true);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (poll_locked())
    if (void* p = fit_locked(size, s)) return p;
  // With wait_across_streams, another stream's free memory, with `s` made to wait for that stream
  // on the device: no host wait and no growth. A pool whose streams each keep what they freed (a
  // fence hands it to the others only once it has completed and been polled) otherwise grows
  // while they hold fits: on the host backend, 4 threads on the training loop held 1.24x their
  // peak live after the first pass and 1.55x after six, every growth made while other streams
  // held fits of hundreds of MiB.
  if (std::uintptr_t const stolen = take_from_other_stream_locked(size, s))
    return reinterpret_cast<void*>(stolen);
  // Streams no thread cache names any more hold memory that only their own next call would fence:
  // streams done with, or destroyed without release_stream. Once they hold a quarter of the pool
  // (and at least this request), a device synchronisation on a thread of its own frees it.
  // On a device with nothing queued that takes microseconds: a miss that the orphans could serve
  // waits for one started less than pool_orphan_wait ago, up to that long, once per call (not
  // longer: device work may wait for the calling thread, and a busy device takes as long as its
  // work). Growing at once instead made every such cycle a growth, and a loop that creates a
  // stream, allocates on it and destroys it without release_stream grew the pool to the whole
  // device (the host backend: 2.0 GB for 6,000 streams of one 1000-byte block each).
  bool orphans_tried = false;
  auto const from_orphans = [&]() -> void* {
    if (orphans_tried) return nullptr;
    orphans_tried = true;
    std::size_t const orphans = parked_by_others_locked(s, orphaned);
    if (orphans < pool_round_up(size)) return nullptr;
    if (!orphan_sync_running_ && orphans >= held_ / 4) start_orphan_sync_locked();
    if (!orphan_sync_running_) return nullptr;
    auto const until = orphan_sync_since_ + pool_orphan_wait;
    if (!growth_done_.wait_until(lock, until, [this] { return !orphan_sync_running_; }))
      return nullptr;
    return fit_locked(size, s);
  };
  // A pool that keeps missing here is too tight for the workload: merging everything back and
  // carving it up again on every miss costs far more than one more chunk (unless orphans hold it).
  if (misses_since_growth_ >= pool_thrash_misses) {
    if (void* p = from_orphans()) return p;
    if (options_.trim_before_growth) trim_unlocked(lock, fenceable(s) ? &s : nullptr);
    if (grow(lock, size, &s)) {
      reset_full_drains(s);
      if (void* p = fit_locked(size, s)) return p;
    }
  }
  ++misses_since_growth_;
  flush_calling_thread_locked();
  drain_class_lists_locked(s);
  adopt_for_fit_locked(s, size);
  poll_locked();
  if (void* p = fit_locked(size, s)) return p;
  // A fit in the extents of a stream that is idle on the device: what it freed is free for every
  // stream, and only that block moves. The rest of its arena stays its own, unlike a reclaim's
  // (below), which merges a quiet stream's lists and hands all of it to the free extents, so that
  // it misses for each of its next blocks. On an H200 with 16 threads on the training loop
  // (bench_alloc --pool-only), reclaims made every warm pass grow the pool 5 to 35 times and run
  // at 13-14 ms per pass for ten passes before they settled, at 1.92x the peak live held; with
  // this, no pass grew after the third, each ran in 5-6 ms (one thread alone: 5.5), and the pool
  // settled at the same 1.92x. Streams with work in flight are not idle: then the reclaim of
  // quiet ones, as before.
  if (std::uintptr_t const idle = take_from_idle_stream_locked(size, s))
    return reinterpret_cast<void*>(idle);
  std::size_t const parked = reclaims_since_growth_ == 0 ? parked_by_others_locked(s, quiet) : 0;
  if (parked > 0 && parked >= held_ / 2)
    if (void* p = reclaim_other_streams_locked(size, s, /*quiet_only=*/true)) return p;
  if (void* p = from_orphans()) return p;
  // Completely free chunks, and chunks wholly freed on the calling stream, are too small for this
  // request (or it would fit): give them back before growing, so that what the pool holds follows
  // the shape of the workload, not its history.
  if (options_.trim_before_growth) trim_unlocked(lock, fenceable(s) ? &s : nullptr);
  // Threads that share `s` may carve what a growth added to its extents before this thread has the
  // mutex again (an expandable pool's growth next to `s`'s own extents joins them): while growths
  // succeed, the device has room, and out_of_memory would be wrong.
  for (int attempt = 0; attempt < pool_growth_attempts && grow(lock, size, &s); ++attempt) {
    reset_full_drains(s);
    if (void* p = fit_locked(size, s)) return p;
  }
  // Other threads' growth in flight (an upstream call, a range's mapping: the mutex is released
  // meanwhile) counts against maximum_size and holds the free memory it claimed until it is done:
  // wait for it, then try again. Without the wait, threads growing side by side near the maximum
  // took each other's growth for memory held and ran out with room left.
  bool waited = false;
  while (growing_ > 0 || range_.claimed_bytes > 0) {
    waited = true;
    growth_done_.wait(lock);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (waited && grow(lock, size, &s)) {
    reset_full_drains(s);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (void* p = reclaim_other_streams_locked(size, s, /*quiet_only=*/false)) return p;
  // Last resort: other threads flush at their next call; wait for the device so that every
  // extent and list handed back so far is free for all.
  flush_request_.fetch_add(1, std::memory_order_relaxed);
  complete_all_after_synchronizing(lock);
  if (void* p = fit_locked(size, s)) return p;
  if (trim_locked() > 0 && grow(lock, size, &s))
    if (void* p = fit_locked(size, s)) return p;
  throw_out_of_memory_locked(size);
}

void pool_state::reset_full_drains(pool_stream& s) noexcept {
  std::lock_guard<pool_lock> arena(s.mutex);
  s.full_drains = 0;
}

bool pool_state::adopt_for_fit_locked(pool_stream& s, std::size_t size) {
  std::lock_guard<pool_lock> arena(s.mutex);
  if (s.extents.empty() || free_.empty()) return false;
  // A merged extent is a free extent and at most two neighbours of the stream's: none holds `size`
  // unless the largest of each could (the common case of a large miss: nothing to walk).
  std::size_t const own_largest = s.extents.largest();
  if (free_.largest() + own_largest + own_largest < size) return false;
  auto const none = s.extents.extents().end();
  auto const merged_size = [&](pool_extent const& e) {
    std::size_t merged = e.size;
    auto const next = s.extents.find_start(e.start + e.size);
    if (next != none && next->second.chunk == e.chunk) merged += next->second.size;
    auto const prev = s.extents.find_end(e.start);
    if (prev != none && prev->second.chunk == e.chunk) merged += prev->second.size;
    return merged;
  };
  // The free extent taken: the lowest-addressed one that merges with the stream's into `size`.
  // Found from the smaller side: the free extents, or the free neighbours of the stream's extents.
  auto const free_end = free_.extents().end();
  auto found = free_end;
  if (free_.count() <= s.extents.count()) {
    for (auto it = free_.extents().begin(); it != free_end && found == free_end; ++it) {
      std::size_t const merged = merged_size(it->second);
      if (merged != it->second.size && merged >= size) found = it;
    }
  } else {
    for (auto const& own : s.extents.extents()) {
      pool_extent const& o = own.second;
      for (auto const candidate : {free_.find_start(o.start + o.size), free_.find_end(o.start)}) {
        if (candidate == free_end || candidate->second.chunk != o.chunk) continue;
        if (found != free_end && found->second.start <= candidate->second.start) continue;
        if (merged_size(candidate->second) >= size) found = candidate;
      }
    }
  }
  if (found == free_end) return false;
  pool_extent const e = found->second;
  // Merging with a neighbour reuses its nodes: once the erase is done the insert cannot fail.
  free_.erase(found);
  if (add_extent(s.extents, e.start, e.size, s.epoch, e.chunk)) s.unfenced_bytes += e.size;
  return true;
}

}  // namespace gpumem::detail
