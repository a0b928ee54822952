// The pool's per-stream state (private to src/mr/pool_*.cpp): what names a stream (a key that is
// never reused), its arena (extents and class lists under its own lock), its fences, the limits on
// what arenas park and take, and the small helpers the pool's files share. See pool_state.hpp for
// the locks.
#pragma once

#include "pool_extents.hpp"
#include "pool_lock.hpp"

#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem::detail {

struct pool_fence {
  event_handle event = nullptr;
  std::uint64_t epoch = 0;  // extents with this epoch or lower are covered
};

// Adds to a counter that only one thread writes at a time (its owner, or the holder of the lock
// that guards it): a relaxed load and store, no read-modify-write.
template <class T, class D>
inline void pool_bump(std::atomic<T>& counter, D delta) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(delta),
                std::memory_order_relaxed);
}

// "0x7f..." for messages about an address.
inline std::string pool_hex(std::uintptr_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

inline std::size_t pool_round_up_to(std::size_t value, std::size_t step) noexcept {
  return (value + step - 1) / step * step;
}

// What names a stream in the pool's table and in the thread caches: never reused, unlike a
// handle. A handle is an address, and a stream created after another was destroyed may get the
// same one (rmm#649); keyed by handle, the new stream would inherit the old one's arena, fences and
// every thread's cached blocks, and reuse at once blocks that the old stream's work may still use.
//   * the null stream: {null_stream, 0};
//   * the per-thread default stream (one handle naming each thread's own stream): {per_thread,
//     the calling thread's serial} (serials are never reused, unlike thread ids);
//   * any other stream: {created, device_backend::stream_id} (cuStreamGetId on the cuda backend).
struct pool_stream_key {
  enum class kind : std::uint8_t { null_stream, per_thread, created };
  kind which = kind::null_stream;
  std::uint64_t id = 0;

  friend bool operator==(pool_stream_key a, pool_stream_key b) noexcept {
    return a.which == b.which && a.id == b.id;
  }
  friend bool operator<(pool_stream_key a, pool_stream_key b) noexcept {
    return a.which != b.which ? a.which < b.which : a.id < b.id;
  }
};

// The merged classes: cached sizes of at least pool_merged_class_bytes. A block parked whole serves
// only its own class: with shapes that change every step (a training loop's activations of 1-16
// MiB), the lists of classes not asked for again held most of the pool, and misses grew the pool
// rather than merge them (host backend, bench_alloc's training loop on one thread and stream, 20
// passes: 1.90x its peak live held, and still 1.90x after 100). So a stream parks at most
// max(pool_merged_list_bytes, held / pool_merged_list_share) of them on its class lists (past that,
// those lists merge back into its extents), and a thread keeps at most pool_merged_bin_bytes of
// each such class (at least one block): 1.44x.
inline constexpr std::size_t pool_merged_class_bytes = std::size_t{1} << 20;
inline constexpr std::size_t pool_merged_bin_bytes = std::size_t{2} << 20;
inline constexpr std::size_t pool_merged_list_bytes = std::size_t{8} << 20;
inline constexpr std::size_t pool_merged_list_share = 32;

// What a thread takes from the free extents (or an idle stream's) for its stream's arena at a time
// for cached sizes (at least its batch).
inline constexpr std::size_t pool_slab_bytes = std::size_t{8} << 20;

// Streams asked whether they are idle, at most, by one miss (take_from_idle_stream_locked).
inline constexpr std::size_t pool_idle_queries = 4;

// How many reaped released streams a pool remembers (pool_state::released_keys_).
inline constexpr std::size_t pool_released_memory = 4096;

// A stream's share of the pool (its arena): blocks freed on it, reusable at once by it and by
// others only after a fence (one event) recorded after their free has completed. Aligned so that
// its lock, taken by the stream's threads without the pool's mutex, shares no cache line with
// another stream's.
struct alignas(64) pool_stream {
  stream_handle handle = nullptr;
  pool_stream_key key;
  // A per-thread default stream (one handle naming each thread's own stream) is owned by one
  // thread, known by its serial (never reused, unlike a thread id); 0 for other streams. Only the
  // owner may record on it or query it. `retired`, under the pool's mutex: the owner has exited
  // (what it freed was fenced then); the entry goes once everything it owned is free.
  std::uint64_t owner_thread = 0;
  bool per_thread = false;
  bool retired = false;
  // release_stream() ran (set under the pool's mutex; read by the caches' threads without it):
  // the stream is about to be destroyed. Threads drop their caches for it at their next miss, and
  // the entry goes once no cache refers to it and it owns nothing. Using the stream again clears
  // it.
  std::atomic<bool> released{false};
  // Under the pool's mutex: thread caches whose `stream` is this entry.
  std::size_t caches = 0;
  // Under the pool's mutex: threads inside obtain() for this stream (which may release the mutex);
  // a retired entry is not reaped while pinned.
  std::uint32_t pins = 0;
  // Under the pool's mutex: fences recorded and not yet seen complete, oldest first, and the
  // epoch up to which every extent is safe for all streams.
  std::deque<pool_fence> fences;
  std::uint64_t completed = 0;

  // The arena, under `mutex` (epoch is written with the pool's mutex held as well).
  alignas(64) mutable pool_lock mutex;
  std::uint64_t epoch = 1;         // given to extents handed back now
  pool_extent_set extents;         // owned by this stream: reusable by it at once
  std::size_t unfenced_bytes = 0;  // extents handed back since the last fence
  // Set by a stream that ran short while this one held extents that no fence covers (a thread
  // that may not use this stream's handle: pool_state::touchable); cleared by its next fence,
  // which its own next give-back or miss records, in a call made on it.
  std::atomic<bool> fence_wanted{false};
  // A created stream whose handle was found naming another stream (a fence asked its id in a call
  // made on that handle): it was destroyed without release_stream and the address reused. Never
  // used by handle again; its memory waits for a device synchronisation.
  std::atomic<bool> stale{false};
  // Large blocks handed back less those taken, under `mutex`, since the last fence.
  std::int64_t net_returned = 0;
  // Whole blocks freed on this stream, per class, parked for reuse by this stream alone (so no
  // fence covers them: they join the extents, at the then-current epoch, when the stream runs
  // short). class_list_bytes is also read without the lock, as a hint.
  std::vector<std::vector<void*>> class_lists;
  // Cold lists: `misses` counts the stream's misses, and class_used[c] is its value when list c
  // was last refilled from or overflowed to. A list unused since the previous miss is cold: a miss
  // merges cold lists back into extents and leaves the lists in use alone (merging those only
  // makes the stream carve them again at once).
  std::uint64_t misses = 0;
  std::vector<std::uint64_t> class_used;
  std::atomic<std::size_t> class_list_bytes{0};
  // Bytes of class_lists in the merged classes (pool_state::merged_class), under `mutex`.
  std::size_t merged_listed = 0;
  // Allocation activity: refills of its threads' caches and large allocations (changed under
  // `mutex` alone, so a relaxed load and store suffice: note_refill; read anywhere); a stream whose
  // count has not moved since the pool last grew is quiet.
  std::atomic<std::uint64_t> refills{0};
  void note_refill() noexcept { pool_bump(refills, 1); }  // under `mutex`
  std::uint64_t refills_seen = 0;  // under the pool's mutex: refills when the pool last grew
  // Under the pool's mutex: the pool's growth count when this stream last ran short (on the slow
  // path, neither its own extents nor the free ones held the block; what follows may still serve
  // it without growth); the growth step counts the streams short since the last growth. Max: never.
  std::uint64_t short_at_growth = std::numeric_limits<std::uint64_t>::max();
  // Misses that merged all of its lists back under its lock alone since it last grew the pool
  // (under `mutex`).
  std::uint64_t full_drains = 0;

  // Under the pool's mutex: no cache names the entry, no thread is inside obtain() for it, and it
  // owns no memory (no fences, extents or listed blocks): an entry nothing needs any more.
  bool unused() const noexcept {
    return caches == 0 && pins == 0 && fences.empty() && extents.bytes() == 0 &&
           class_list_bytes.load(std::memory_order_relaxed) == 0;
  }

  // Blocks of `delta` bytes in all put on / taken off class_lists; `merged`: of a merged class.
  void add_listed(std::size_t delta, bool merged) noexcept {
    pool_bump(class_list_bytes, delta);
    if (merged) merged_listed += delta;
  }
  void remove_listed(std::size_t delta, bool merged) noexcept {
    class_list_bytes.store(class_list_bytes.load(std::memory_order_relaxed) - delta,
                           std::memory_order_relaxed);
    if (merged) merged_listed -= delta;
  }
};

}  // namespace gpumem::detail
