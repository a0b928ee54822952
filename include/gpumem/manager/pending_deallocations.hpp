// gpumem/manager/pending_deallocations.hpp
//
// The deferred-deallocation queue of one context (Numba's _PendingDeallocs). Releases are queued
// instead of run, and the queue is flushed when
//   * it holds MORE than `max_count` items (NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT, default 10:
//     the 11th item triggers the flush, 10 do not), or
//   * the queued bytes are MORE than `max_bytes` (NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO, default
//     0.2, times the device's total memory: equality does not flush), or
//   * flush() is called (the managers call it on out-of-memory before retrying, and in reset()).
// While a defer_cleanup() guard is alive nothing is released (flush() is a no-op, as Numba's
// clear() is while disabled); when the outermost guard ends, the queue is flushed if it is over a
// limit.
//
// Errors: a release that throws is reported through gpumem::log(error) and the flush goes on with
// the other items. (Numba's documentation says an error cancels the remaining deallocations: its
// queue stops there, raises, and leaves the rest for its next flush. We deliberately do not: one
// failed free holds back no other memory, on both backends one failed free does not poison the
// next, and a flush may run inside a destructor, where nothing can be thrown.)
//
// close() (context destruction) flushes regardless of deferral; afterwards enqueue() runs the
// release at once, so memory that outlives its context is still freed.
//
// A release barrier (set_release_barrier) runs once before each batch of releases. A manager whose
// frees are reusable at once (a pool) sets a device synchronisation there, as Numba's flush whose
// first cuMemFree waits for the device. A barrier that throws is logged and the batch is still
// released.
//
// Retirement (only while a barrier is set). A queue that passes a limit by itself (enqueue, not
// flush()) does not wait for the barrier: its items move, as they are, to the *retired* list, and
// the queue is empty again (size() drops at Numba's threshold, as Numba's queue does). Retired
// items are released together, behind ONE barrier, when
//   * the retired list holds more than max_retired_count() items (retired_batches times
//     `max_count`) or more than max_retired_bytes() bytes (`max_bytes` / retired_batches: 1.25%
//     of the device with Numba's default ratio), checked each time a batch is retired, or
//   * flush() runs (the managers call it on out-of-memory before retrying, and in reset()), the
//     outermost defer_cleanup() guard ends over a limit, close() runs, or the barrier is replaced
//     (the old one covers them).
// A retired item is never released before a barrier that began after it was queued (it joins the
// list before the barrier is taken, under the mutex), and released items are what the barrier
// covered: so one device synchronisation covers many batches while the bytes held back beyond
// Numba's policy stay under max_retired_bytes(). Without a barrier a batch is released at once, as
// before (the default manager's frees wait for the device themselves).
//
// Two kinds of item: a std::function (any release), and a block_free (a function pointer, the
// shared state it needs, an address and a stream), which the managers queue for device memory: it
// needs no heap allocation of its own, so a queued free costs a lock and a vector slot.
//
// Thread safety: every member may be called from any thread. One mutex guards the items, the
// retired items, the byte counts and the deferral depth; releases run OUTSIDE the mutex (a release
// may enqueue, and other threads keep enqueueing during a long flush). Concurrent flushes each
// take a disjoint batch. Stream semantics: none — a release is a synchronous call made by the
// flushing thread.
#pragma once

#include <gpumem/manager/cleanup_guard.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace gpumem {

// Owned by a std::shared_ptr (as a context owns its queues), a queue's defer_cleanup() guard may
// outlive it (a guard alive across gpumem::close()): the guard's end is then a no-op.
class pending_deallocations : public std::enable_shared_from_this<pending_deallocations> {
 public:
  // The retired list holds at most this many batches' worth of items, and this fraction of the
  // queue's byte limit (see the file comment).
  static constexpr std::size_t retired_batches = 16;

  // A free queued without a std::function: release(state.get(), ptr, bytes, stream) runs it. It
  // must not throw (it reports its own errors); `state` stays alive until it has run.
  struct block_free {
    void (*release)(void* state, void* ptr, std::size_t bytes, void* stream) noexcept = nullptr;
    std::shared_ptr<void> state;
    void* ptr = nullptr;
    void* stream = nullptr;
  };

  pending_deallocations(std::size_t max_count, std::size_t max_bytes);
  pending_deallocations(pending_deallocations const&) = delete;
  pending_deallocations& operator=(pending_deallocations const&) = delete;
  // Runs whatever is still queued (as close()).
  ~pending_deallocations();

  // Queues `release` (the real free of `bytes` bytes; 0 for non-memory resources) and flushes if
  // the queue is now over a limit and not deferred.
  void enqueue(std::function<void()> release, std::size_t bytes);
  // The same for a block_free (`block.release` must not be null).
  void enqueue(block_free block, std::size_t bytes);
  // Runs every queued and retired release (behind one barrier) unless deferred. Returns how many
  // ran.
  std::size_t flush();
  // Flushes regardless of deferral and makes later enqueue() calls release at once.
  void close() noexcept;
  // Runs `barrier` before each non-empty batch of releases, outside the lock, on the releasing
  // thread (see the file comment). Replaces the previous one, after releasing the retired items
  // behind the previous one; an empty function removes it. The barrier may run after the context
  // is gone: it must capture shared state, never a manager.
  void set_release_barrier(std::function<void()> barrier);

  // The queue (Numba's pending deallocations): what the count and ratio limits apply to.
  std::size_t size() const;
  std::size_t bytes() const;
  // The retired list: out of the queue, waiting for the barrier that releases them.
  std::size_t retired_size() const;
  std::size_t retired_bytes() const;
  // The byte limit for a device of `total` bytes and NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO `ratio`
  // (in [0, 1]): Numba's int(total * ratio), saturating at SIZE_MAX where the product rounds to
  // 2^64.
  static std::size_t max_bytes_for(std::size_t total, double ratio) noexcept;

  std::size_t max_count() const noexcept { return max_count_; }
  std::size_t max_bytes() const noexcept { return max_bytes_; }
  std::size_t max_retired_count() const noexcept { return max_retired_count_; }
  std::size_t max_retired_bytes() const noexcept { return max_retired_bytes_; }
  bool is_deferred() const;
  bool is_closed() const;

  // Defers every release until the returned guard (and every other live guard) is gone. Nests.
  cleanup_guard defer_cleanup();

  // Throws gpumem::logic_error if a byte count, an item count or the deferral depth is
  // inconsistent, or the retired list is over its limits. For tests and model-based stress tests.
  void check_invariants() const;

 private:
  struct item {
    std::function<void()> release;  // empty for a block_free
    block_free block;
    std::size_t bytes;
  };
  // What one barrier covers: retired items (older) and queued ones, released in that order.
  struct batch {
    std::vector<item> retired;
    std::vector<item> queued;
    bool empty() const noexcept { return retired.empty() && queued.empty(); }
  };
  void enqueue_item(item queued);
  bool over_limits_locked() const noexcept;
  bool retired_over_limits_locked() const noexcept;
  // The queued items (the queue is left empty, with room for the next batch).
  batch take_queued_locked();
  // The retired items (the list is left empty, with the room it had).
  std::vector<item> take_retired_locked();
  // Everything: the retired items and the queued ones.
  batch take_all_locked();
  // Moves the queued items to the retired list; returns the retired items if that put the list
  // over its limits (for release behind the barrier), else nothing.
  batch retire_locked();
  using barrier = std::shared_ptr<std::function<void()> const>;
  // Runs `items` after `before` (if any; skipped for an empty batch). Returns how many ran.
  static std::size_t run(batch& items, barrier const& before) noexcept;
  static std::size_t release_all(std::vector<item>& items) noexcept;
  void end_deferral() noexcept;

  std::size_t const max_count_;
  std::size_t const max_bytes_;
  std::size_t const max_retired_count_;
  std::size_t const max_retired_bytes_;
  mutable std::mutex mutex_;
  std::vector<item> items_;
  std::size_t bytes_ = 0;
  std::vector<item> retired_;  // oldest first; empty whenever barrier_ is
  std::size_t retired_bytes_ = 0;
  std::size_t deferral_depth_ = 0;
  bool closed_ = false;
  barrier barrier_;  // copied (a reference count) under the lock for each batch
};

}  // namespace gpumem
