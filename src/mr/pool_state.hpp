// Internals of pool_resource (private to src/mr/pool_*.cpp).
//
// pool_state is the pool: the front end (thread caches, pool_thread_cache.cpp) and the shared back
// end (chunks, free extents, per-stream ownership and fences: pool_state.cpp, pool_obtain.cpp,
// pool_streams.cpp, pool_fences.cpp, pool_waits.cpp, pool_batches.cpp, pool_large_path.cpp,
// pool_operations.cpp, pool_growth.cpp, pool_range.cpp, pool_invariants.cpp). Locks:
//   * pool_state::mutex_ guards the chunks, the free extents, fences, growth and the stream table;
//   * each pool_stream::mutex (a pool_lock: cheap when uncontended, pool_lock.hpp) guards that
//     stream's arena: its class lists and its extents. A thread cache refills from and overflows
//     to its stream's lists, and carves new blocks from its stream's extents, under that lock
//     alone: with one thread per stream, only the pool's slow paths (polls, reclaims, fences,
//     trim, validation) ever wait for it, and threads on separate streams do not meet until a
//     stream's arena runs dry;
//   * chunks_mutex_ (shared) lets a stream look chunks up without mutex_; growth and trim take it
//     exclusively, with mutex_ held, to change the chunk table;
//   * order: mutex_, then a stream's lock (several only with mutex_ held), then chunks_mutex_. A
//     stream's lock is never held while taking mutex_.
// The per-stream state is in pool_stream.hpp, the thread caches in pool_thread_cache.hpp.
#pragma once

#include "pool_counters.hpp"
#include "pool_extents.hpp"
#include "pool_large_blocks.hpp"
#include "pool_range_state.hpp"
#include "pool_stream.hpp"
#include "pool_thread_cache.hpp"
#include "pool_vrange.hpp"

#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/mr/detail/pool_size_classes.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpumem::detail {

class pool_state;
struct pool_range_plan;

// A chunk taken out of the pool, to be given back to the upstream in `order`'s stream order.
struct pool_retired_chunk {
  void* ptr;
  std::size_t size;
  stream_handle order;
};

class pool_state {
 public:
  pool_state(memory_resource& upstream, pool_options const& options);
  ~pool_state();
  pool_state(pool_state const&) = delete;
  pool_state& operator=(pool_state const&) = delete;

  // --- front end (pool_thread_cache.cpp) ---
  void* allocate(std::size_t bytes, stream_handle stream);
  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept;

  // --- back end (pool_batches.cpp) ---
  void refill(pool_thread_cache& cache, unsigned cls);
  // refill's slow half, under mutex_: carves up to `want` blocks of class `cls` for the cache's
  // stream and returns how many it pushed.
  std::uint32_t carve_batch(pool_thread_cache& cache, unsigned cls, std::uint32_t want);
  void overflow(pool_thread_cache& cache, unsigned cls) noexcept;
  // A refill or overflow found its stream's fence wanted (pool_stream::fence_wanted): takes
  // mutex_ and fences the stream, in this call made on it.
  void fence_as_wanted(pool_stream& s) noexcept;
  // The large-size path: first the calling thread's stream's own extents under that stream's lock
  // alone (pool_thread_cache.cpp); else allocate_large / deallocate_large, under mutex_.
  enum class own_free { taken, refused, elsewhere };
  void* take_large_own(pool_thread_cache& cache, std::size_t size) noexcept;
  own_free give_back_large_own(pool_thread_cache& cache, void* ptr, std::size_t size) noexcept;
  // Takes a large block out of large_blocks_ and says its chunk; false (and logs) if it is not
  // live with that size.
  bool check_large_free(std::uintptr_t addr, std::size_t size, pool_chunk*& chunk) noexcept;
  // Bytes a stream hands back between two fences of the large path: fence_bytes, or an eighth of
  // what the pool holds if that is more (the fences let other streams reuse what a stream freed;
  // an event per block of a large workload only costs).
  std::size_t large_fence_bytes() const noexcept {
    return std::max(options_.fence_bytes, held_hint_.load(std::memory_order_relaxed) / 8);
  }
  void* allocate_large(std::size_t size, std::size_t requested, stream_handle stream);
  // The large path's fence on `s` (mutex_ held): one event over what `s` handed back. Not polled
  // at once (a fence found complete hands all of the stream's extents to the free ones, and the
  // stream would then take the mutex for each of its next blocks): a stream short of memory polls
  // every fence; `s` polls its own only once pool_large_fences_polled of them are pending.
  void fence_large_locked(pool_stream& s) noexcept;
  void deallocate_large(void* ptr, std::size_t size, std::size_t requested,
                        stream_handle stream) noexcept;
  // A cached size without a thread cache (none could be made, or the thread is exiting).
  void* allocate_uncached(std::size_t bytes, stream_handle stream);
  void deallocate_uncached(void* ptr, std::size_t size, std::size_t bytes,
                           stream_handle stream) noexcept;
  std::shared_ptr<pool_thread_cache> make_cache(stream_handle stream);
  // The key of `stream` in the table and the thread caches (pool_stream_key). Asks the backend
  // for the id of a stream other than the null and per-thread ones (may throw cuda_error).
  pool_stream_key key_of(stream_handle stream) const;
  // A thread drops its cache of a released stream (its blocks go back to the stream's lists and
  // its counters to the retired ones); the cache is not used again.
  void drop_cache(pool_thread_cache& cache) noexcept;
  // drop_cache for each of the calling thread's caches of this pool whose stream was released.
  void drop_released_caches_of_calling_thread() noexcept;
  // The calling thread uses a released stream again through its cache: the release is undone.
  void reuse_released(pool_thread_cache& cache) noexcept;
  pool_thread_cache* calling_thread_cache(stream_handle stream) noexcept;
  // As calling_thread_cache, for a free: sets `released` (and returns null) when `stream` was
  // given back with release_stream, which a free must not undo.
  pool_thread_cache* calling_thread_cache_for_free(stream_handle stream, bool& released) noexcept;
  // deallocate's work once the block is checked: through `cache` (null: the shared path).
  void deallocate_checked(void* ptr, std::size_t bytes, std::size_t size, pool_thread_cache* cache,
                          stream_handle stream) noexcept;
  // A free on a released stream (see pool_thread_cache.cpp).
  void deallocate_on_released(void* ptr, std::size_t bytes, stream_handle stream) noexcept;
  // True when the stream `key` names was given back with release_stream and not used since.
  bool is_released(pool_stream_key key) const;
  // Thread exit: hands the cache's blocks back and keeps its counters (registry mutex held).
  void retire_cache(pool_thread_cache& cache) noexcept;
  // The calling thread's caches of this pool go back to the per-stream lists.
  void flush_calling_thread();
  void track_allocate(void* ptr, std::size_t size, std::size_t requested, stream_handle stream);
  // track_blocks: forgets `ptr` and returns true when it is a live block asked for with exactly
  // `requested` bytes; otherwise logs the pointer, the size given and the size allocated, counts
  // an invalid deallocation and returns false (the block, if live, stays live).
  bool track_deallocate(void* ptr, std::size_t requested) noexcept;

  pool_statistics statistics() const;
  void check_invariants() const;
  std::size_t trim();
  void release_stream(stream_handle stream);
  void close(pool_live_chunks live);
  // The destructor after close().
  void destroy_closed() noexcept;
  void deallocate_after_close(void* ptr, std::size_t bytes) noexcept;
  bool is_closed() const noexcept {
    return closed_.load(std::memory_order_relaxed) != closed_state::open;
  }
  memory_info memory_info_snapshot() const;

  std::uint64_t id() const noexcept { return id_; }
  unsigned num_classes() const noexcept { return num_classes_; }
  std::uint64_t flush_request() const noexcept {
    return flush_request_.load(std::memory_order_relaxed);
  }
  pool_options const& options() const noexcept { return options_; }
  memory_resource& upstream() const noexcept { return upstream_; }
  device_backend& stream_backend() const noexcept { return backend_; }
  int device() const noexcept { return device_; }  // current at the pool's construction
  std::string name() const;

  // Used by the thread-cache code with mutex_ held.
  void flush_cache_locked(pool_thread_cache& cache) noexcept;
  std::size_t flush_calling_thread_locked() noexcept;
  std::mutex& mutex() const noexcept { return mutex_; }

 private:
  using extent_map = pool_extent_set::map;

  pool_stream& stream_locked(stream_handle handle);
  bool is_per_thread(stream_handle handle) const noexcept {
    return has_per_thread_handle_ && handle != nullptr && handle == per_thread_handle_;
  }
  // Drops the entries of released streams, of exited threads' per-thread streams and of created
  // streams that own nothing and no cache refers to any more.
  void reap_retired_locked() noexcept;
  // Adds a reaped released stream to released_keys_ (dropping the oldest past the bound).
  void remember_released_locked(pool_stream_key key) noexcept;
  // Moves an unregistering cache's counters to the retired totals and removes it from caches_.
  void detach_cache_locked(pool_thread_cache& cache) noexcept;
  bool fenceable(pool_stream const& s) const noexcept;
  // The chunk holding `addr` (null if none): with mutex_ or chunks_mutex_ held.
  pool_chunk* chunk_of(std::uintptr_t addr) noexcept;
  // Adds a range to a set of extents; logs and drops it if it is outside every chunk or overlaps
  // free memory (a double free or a wrong size). False then.
  bool add_extent(pool_extent_set& set, std::uintptr_t addr, std::size_t size, std::uint64_t epoch,
                  pool_chunk* chunk);
  // Best fit for `size` over `s`'s extents and the free ones (the smaller fit wins); takes `s`'s
  // lock. 0 if none fits. A large block (above max_cached_size) taken from a free extent brings a
  // slab of it to `s` (large_slab_locked).
  std::uintptr_t best_fit_locked(std::size_t size, pool_stream& s);
  // Takes `size` bytes from the start of the free extent `free` for `s` (whose lock the caller
  // holds), and with them up to `slab` bytes of it into `s`'s extents (only `size` if that insert
  // fails). Returns their address. Never throws.
  std::uintptr_t take_slab_held(pool_extent_entry& free, std::size_t size, std::size_t slab,
                                pool_stream& s) noexcept;
  // The slab a large miss of `size` bytes on `s` takes from a free extent (at least `size`): while
  // another stream allocates, a stream's growth step, or its share of the pool (held_ / streams)
  // if that is less; the whole extent (SIZE_MAX) when `s` is the pool's only stream; `size` alone
  // otherwise, and in an expandable pool, after a failed growth, or near maximum_size.
  std::size_t large_slab_locked(std::size_t size, pool_stream const& s) const noexcept;
  void* fit_locked(std::size_t size, pool_stream& s) {
    return reinterpret_cast<void*>(best_fit_locked(size, s));
  }
  // Finds `size` bytes for stream `s` (see pool_obtain.cpp); may release `lock` while growing.
  void* obtain(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream& s,
               bool own_tried = false);
  // A block of `size` bytes for `s` from another stream's extents (the smallest fit), taken at
  // once: `s` is made to wait, on the device, for an event over the block, so that its work on the
  // block follows the owner's: recorded on the owner now where it is touchable, else the owner's
  // latest fence (an extent handed back after it is not taken). 0 if none (or a stream involved is
  // being captured into a graph).
  std::uintptr_t take_from_other_stream_locked(std::size_t size, pool_stream& s);
  // A block of `size` bytes for `s` cut from the smallest fit among other streams' extents whose
  // stream is idle on the device (asked after a cut of its epochs: what it freed before is free for
  // every stream), taken at once, with a slab of pool_slab_bytes for a cached size (into `s`'s
  // extents); the rest of that extent stays with its owner. Only streams touchable from `s` are
  // asked. 0 if none.
  std::uintptr_t take_from_idle_stream_locked(std::size_t size, pool_stream& s);
  // Another stream took `taken` bytes of `owner`'s extents (before they leave them): its counts of
  // what it handed back follow.
  void debit_owner_held(pool_stream& owner, std::size_t taken) noexcept;
  // The rest of an extent taken from `owner` for `s`: into `s`'s extents at its epoch, or back to
  // the owner's (at `owner_epoch`) when no memory can be had for the node. Takes each lock in turn.
  void keep_rest_locked(pool_stream& s, pool_stream& owner, std::uintptr_t rest, std::size_t bytes,
                        std::uint64_t owner_epoch, pool_chunk* chunk) noexcept;
  // Drains the class lists of the other streams (the quiet ones, or all) and settles those
  // streams (see obtain); then the best fit for `size` (null if none).
  void* reclaim_other_streams_locked(std::size_t size, pool_stream& s, bool quiet_only);
  // Moves into `s`'s extents one free extent that, merged with its neighbours there, holds `size`
  // bytes (free memory may go to any stream at once); takes `s`'s lock. True if one moved.
  bool adopt_for_fit_locked(pool_stream& s, std::size_t size);
  // The stream grew the pool: it may merge all of its lists back again (takes its lock).
  void reset_full_drains(pool_stream& s) noexcept;
  // True (logs, reports the refused free) if [addr, addr + size) overlaps a free or stream-owned
  // extent of any stream: a double free or a wrong size. Takes the streams' locks.
  bool overlaps_extent_locked(std::uintptr_t addr, std::size_t size);
  void log_overlap(std::uintptr_t addr, std::size_t size) const;
  // A free the pool refuses (a double free, a wrong size, a foreign pointer): reported
  // (report_refused_deallocation), counted in invalid_deallocations and, when `why` is given,
  // logged as "deallocate(addr, bytes B): why; ignored" (if the message can be made).
  void refuse_deallocation(std::uintptr_t addr, std::size_t bytes,
                           char const* why = nullptr) noexcept;
  // A block that could be neither kept nor handed back (no host memory for either): counted in
  // lost_bytes_ (check_invariants accounts for it) and logged if the log can be written.
  void note_lost(std::uintptr_t addr, std::size_t size) noexcept;
  // Bytes in the class lists and extents of the streams other than `s` that `which` selects:
  // quiet ones (not allocated since the pool last grew: done, or only freeing, like the producer
  // of a producer and consumer), orphaned ones.
  std::size_t parked_by_others_locked(pool_stream const& s,
                                      bool (*which)(pool_stream const&)) const noexcept;
  static std::size_t parked_bytes(pool_stream const& s) noexcept {
    return s.extents.bytes() + s.class_list_bytes.load(std::memory_order_relaxed);
  }
  static bool quiet(pool_stream const& s) noexcept {
    return s.refills.load(std::memory_order_relaxed) == s.refills_seen;
  }
  // A created stream that no thread cache names and that was not released: only its own next
  // call, or a device synchronisation, frees what it holds.
  static bool orphaned(pool_stream const& s) noexcept;
  // --- waits for the device (pool_waits.cpp) ---
  // A stream's epochs cut (its lists drained first) and the stream pinned, for a wait.
  struct stream_cut {
    pool_stream* stream;
    std::uint64_t upto;
  };
  std::vector<stream_cut> cut_streams_locked(bool (*which)(pool_stream const&));
  // Unpins the cut streams; when the device was synchronised after the cuts, what each held up
  // to its cut is free for every stream.
  void complete_cuts_locked(std::vector<stream_cut> const& cuts, bool synchronized) noexcept;
  // backend_.synchronize() on the pool's device, for the orphan synchronisation's thread; false
  // (logged) if it failed.
  bool synchronize_device() noexcept;
  // Cuts the orphaned streams' memory and synchronises the device on a thread of its own
  // (orphan_sync_), which then completes the cuts: a miss waits for it only briefly (obtain's
  // pool_orphan_wait). One at a time.
  void start_orphan_sync_locked() noexcept;
  // Waits for the orphan synchronisation's thread, if any (without mutex_): close(), destructor.
  void join_orphan_sync() noexcept;
  // --- a stream's arena, with its lock held (the *_held functions; no mutex_ needed) ---
  // Carves up to `want` blocks of class `cls` from the cache's stream's extents (and cold lists)
  // into the cache's bin; returns how many.
  std::uint32_t carve_own_held(pool_thread_cache& cache, unsigned cls, std::uint32_t want);
  // A block of a larger class taken from `s`'s class lists: its address and size (0, 0 if none).
  struct split_block {
    std::uintptr_t base;
    std::size_t size;
  };
  split_block split_larger_held(unsigned cls, pool_stream& s);
  // Hands [ptr, ptr + size) back to `s`'s extents (with chunks_mutex_ or mutex_ held as well).
  // False when no memory could be had for its extent node: then nothing changed and the caller
  // still holds the block (a range refused as not the pool's is logged and counts as handed back).
  [[nodiscard]] bool give_back_held(void* ptr, std::size_t size, pool_stream& s) noexcept;
  // Moves the stream's listed blocks into its extents: all of them, or only the cold lists.
  void drain_class_lists_held(pool_stream& s, bool cold_only = false);
  void drain_lists_from_held(pool_stream& s, unsigned first, bool cold_only);
  // Classes of at least pool_merged_class_bytes: a stream parks at most merged_list_limit() bytes
  // of them on its class lists; past that, bound_merged_lists_held (after every addition to the
  // lists, stream's lock held) merges those lists back into its extents.
  void bound_merged_lists_held(pool_stream& s) noexcept;
  bool merged_class(unsigned cls) const noexcept { return cls >= first_merged_class_; }
  // The bytes a block of `bytes` takes: its size class up to max_cached_size, else 256-byte units.
  std::size_t block_size(std::size_t bytes) const noexcept {
    return bytes <= options_.max_cached_size ? pool_class_size(pool_size_class(bytes))
                                             : pool_round_up(bytes);
  }
  std::size_t merged_list_limit() const noexcept {
    return std::max(pool_merged_list_bytes,
                    held_hint_.load(std::memory_order_relaxed) / pool_merged_list_share);
  }
  // --- streams and fences (mutex_ held; they take the stream's lock) ---
  [[nodiscard]] bool give_back_locked(void* ptr, std::size_t size, pool_stream& s) noexcept;
  // Fences `s` (the stream of the caller's free) when it has handed back at least `threshold` bytes
  // since its last fence, or another stream has wanted fences since (and other streams exist to
  // use them).
  void after_give_back_locked(pool_stream& s, std::size_t threshold) noexcept;
  void drain_class_lists_locked(pool_stream& s, bool cold_only = false);
  void fence_locked(pool_stream& s);
  // fence_locked, then a poll of `s`'s fences once at least `poll_at` are pending (0: always;
  // no_poll: never); a failure is logged, not thrown. A stream nothing may record on any more
  // (not fenceable) only has its fence_wanted cleared.
  static constexpr std::size_t no_poll = std::numeric_limits<std::size_t>::max();
  void fence_or_warn_locked(pool_stream& s, std::size_t poll_at) noexcept;
  // True if `s`'s handle may be used (queried, recorded on) in a call made on `caller`'s stream
  // (null: a call on no stream, such as trim): the legacy default stream and the calling thread's
  // own per-thread default stream (fenceable); a created stream only when it is the caller's, or
  // with query_other_streams. Any other may have been destroyed without release_stream, and a
  // call on a destroyed stream's handle crashes the process on CUDA (docs/mr.md).
  bool touchable(pool_stream const& s, pool_stream const* caller) const noexcept;
  // What `s` freed, for every stream, without waiting. A stream touchable from `caller` (null: a
  // call made on no stream, such as trim): at once if idle (or released), else once a fence
  // recorded now completes. Any other: its completed fences are polled, and it is asked
  // (fence_wanted) to fence the rest in its own next call.
  void settle_locked(pool_stream& s, pool_stream const* caller);
  // trim() and the last resort before out-of-memory: every stream cut, the device synchronised
  // with `lock` released, the cuts completed (pool_waits.cpp). It also covers streams destroyed
  // without release_stream, whose handles the pool never uses.
  void complete_all_after_synchronizing(std::unique_lock<std::mutex>& lock);
  // Starts a new epoch on `s` and returns the last one: a stream query or synchronisation made
  // after this covers every extent of `s` with an epoch up to the value returned (extents handed
  // back meanwhile, by threads working on `s` without mutex_, get a later epoch).
  std::uint64_t cut_epoch_locked(pool_stream& s);
  // `s` has finished all its work up to epoch `upto` (it was idle or synchronised after
  // cut_epoch_locked): every fence up to it has completed and those extents go to every stream.
  void complete_all_fences_locked(pool_stream& s, std::uint64_t upto);
  // Queries `s`; when idle, completes everything it was given back. True then.
  bool complete_if_idle_locked(pool_stream& s);
  bool poll_locked();
  bool poll_stream_locked(pool_stream& s);
  void release_owner_locked(pool_stream& s, std::uint64_t upto);
  // Takes a chunk for `size` bytes from the upstream, with `lock` (on mutex_) released during the
  // upstream's call: other threads go on carving meanwhile. False if the upstream (or the
  // maximum size) refuses; the pool's state may have changed either way.
  bool grow(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream* s);
  // The preferred growth: chunk_size for each stream short since the last growth, held to
  // max(chunk_size, held / streams seen, rounded down to 2 MiB) when more than one is short.
  std::size_t growth_step_locked() const noexcept;
  // The growth step for one stream: half of what the pool holds (2 MiB at least), at most
  // chunk_size; for a chunked pool, at least the largest block it has grown for lately (at most
  // eight chunk_size).
  std::size_t stream_growth_step_locked() const noexcept;
  // A growth for a request of `need` bytes succeeded: the floor of the growth step follows it.
  void note_growth_request_locked(std::size_t need) noexcept;
  // chunk_size, rounded down to the pool's granularity (at least that): steps and slabs made from
  // it keep every extent and block 256-byte aligned whatever chunk_size a user gives.
  std::size_t chunk_bytes() const noexcept {
    return std::max(pool_granularity, options_.chunk_size / pool_granularity * pool_granularity);
  }
  // Counts `bytes` just added to the pool by a growth.
  void note_growth_locked(std::size_t bytes) noexcept;
  // Gives back every chunk that is one extent free for all streams or owned by `stream`, and with
  // `shrink_range`, the memory under every whole page of the free extents of an expandable pool's
  // range.
  // (With `later`, the chunks are listed there instead of given back: the caller gives them back
  // without the mutex, as trim_unlocked does.)
  std::size_t trim_locked(pool_stream* stream = nullptr, bool shrink_range = true,
                          std::vector<pool_retired_chunk>* later = nullptr);
  // Gives back `chunk` if it is wholly free (see trim_locked; before a growth, at its second
  // sighting); the bytes given back. The chunk is gone when that is not 0. With `later`, it must
  // have room for one more entry.
  std::size_t trim_chunk_locked(pool_chunk& chunk, pool_stream* stream,
                                std::vector<pool_retired_chunk>* later);
  // trim_locked(stream, false) before a growth, with `lock` released while the upstream takes the
  // chunks back (cudaFree waits for the whole device: no other thread may wait for the mutex
  // meanwhile). The pool's state may have changed when it returns.
  void trim_unlocked(std::unique_lock<std::mutex>& lock, pool_stream* stream);
  // True if `chunk` is covered by free extents and (when given) extents of `stream`, whose lock
  // the caller holds. erase_cover_locked removes that cover; true if part of it was `stream`'s.
  bool wholly_free_locked(pool_chunk const& chunk, pool_stream* stream) noexcept;
  bool erase_cover_locked(pool_chunk const& chunk, pool_stream* stream) noexcept;
  // --- expandable pools (pool_range.cpp) ---
  // Unmaps every whole page of the range's free extents (trim); returns the bytes given back.
  std::size_t shrink_range_locked() noexcept;
  // grow()'s expandable half: maps pages where `size` bytes then fit for `s` (null: for every
  // stream), with mutex_ released while mapping, and moves the memory under whole pages of free
  // extents elsewhere in the range there first (pool_range.cpp). False when the range has no
  // room for `size` or the device no memory.
  bool grow_range(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream* s);
  // grow_range's steps (pool_range_plan is private to pool_range.cpp).
  // own_upto: `s`'s extents up to this epoch may give their pages (0: none); fresh: the new
  // memory the growth may take before it moves any (fresh_allowance_locked).
  bool plan_range_locked(pool_range_plan& plan, std::size_t size, pool_stream* s,
                         std::uint64_t own_upto, std::size_t fresh);
  void choose_sources_locked(pool_range_plan& plan, pool_stream* s, std::uint64_t own_upto,
                             std::size_t fresh);
  // The bytes live now as far as the pool's counts tell: held, less what is free, owned by a
  // stream, listed or cached (the caches' counts may lag by the calls in flight).
  std::size_t live_estimate_locked() const noexcept;
  // The new memory a growth for `need` bytes may take while the pool then holds at most
  // pool_options::held_target times the most it has had live at a growth (with the request).
  std::size_t fresh_allowance_locked(std::size_t need) noexcept;
  // After a growth that moved memory: raises range_.slack when such growths come too often.
  void note_range_move_locked() noexcept;
  // Allocations so far, all threads (for the statistics and the thrash guard above).
  std::uint64_t allocations_locked() const noexcept;
  void finish_range_locked(pool_range_plan& plan, pool_stream* s, bool mapped) noexcept;
  // Unmapped pages of the range: into range_.holes, or off the end of its chunk.
  void add_hole_locked(std::uintptr_t addr, std::size_t size) noexcept;
  // Puts free memory of the range back: into `s`'s extents (null: the free ones).
  void put_back_locked(std::uintptr_t addr, std::size_t size, pool_stream* s) noexcept;
  [[noreturn]] void throw_out_of_memory_locked(std::size_t size);
  event_handle take_event_locked();
  // Keeps `event` for reuse, or destroys it if no memory can be had for that: never throws, so an
  // event leaves a fence list exactly once (a push_back that threw in a loop over the fences left
  // some events both kept and still listed, to be destroyed twice).
  void return_event_locked(event_handle event) noexcept;

  memory_resource& upstream_;
  pool_options options_;
  device_backend& backend_;
  // The device current at construction: the pool's chunks, events and synchronisations belong to
  // it, whichever device is current when a thread calls (scoped_device around the device work).
  int device_ = 0;
  unsigned num_classes_;
  unsigned first_merged_class_;  // num_classes_ if none
  std::uint64_t id_;
  stream_handle per_thread_handle_ = nullptr;
  stream_handle growth_stream_ = nullptr;  // the pool's own (grow), made on first use
  std::thread orphan_sync_;                // start_orphan_sync_locked's thread
  bool orphan_sync_running_ = false;       // under mutex_
  std::chrono::steady_clock::time_point orphan_sync_since_;  // when it started (under mutex_)
  bool has_per_thread_handle_ = false;
  std::atomic<std::uint64_t> flush_request_{0};
  // close(): open until then; afterwards frees only count (closed_frees_) and the destructor
  // gives back or abandons the chunks left.
  enum class closed_state : unsigned char { open, give_back_at_destruction, abandon };
  std::atomic<closed_state> closed_{closed_state::open};
  std::atomic<std::uint64_t> closed_frees_{0};
  std::atomic<std::size_t> closed_freed_bytes_{0};      // their sizes as the pool rounds them
  std::atomic<std::size_t> closed_freed_requested_{0};  // and as requested
  // What was live at close() (set by it): without track_blocks, frees after it are counted only
  // while they stay within these; the closed_ counters change under mutex_.
  std::uint64_t live_blocks_at_close_ = 0;
  std::size_t live_bytes_at_close_ = 0;
  std::size_t requested_bytes_at_close_ = 0;
  // Read by every large allocate or free without mutex_ (and seldom written): kept off the lines
  // that a miss writes under mutex_.
  std::atomic<std::size_t> held_hint_{0};     // held_, readable without mutex_
  std::atomic<std::size_t> stream_count_{0};  // streams_.size(), readable without mutex_
  pool_large_blocks large_blocks_;
  std::unique_ptr<pool_vrange> vrange_;  // expandable pools: the range (set at construction)

  // On its own cache line: every allocate/deallocate of every thread reads the fields above (id,
  // options, flush_request_, the large blocks' region table), and a lock word on the same line
  // would turn each refill or overflow into a cache miss for all the other threads.
  alignas(64) mutable std::mutex mutex_;
  std::map<std::uintptr_t, pool_chunk> chunks_;  // changed with chunks_mutex_ held as well
  pool_extent_set free_;                         // extents free for every stream
  // Keyed by what never names another stream (pool_stream_key), not by handle.
  std::map<pool_stream_key, std::unique_ptr<pool_stream>> streams_;
  // Keys of released streams whose entries were reaped, newest last (at most
  // pool_released_memory of them): a late free on such a stream is still known as one on a
  // released stream (deallocate_on_released), not taken as a new stream's first use.
  std::set<pool_stream_key> released_keys_;
  std::deque<pool_stream_key> released_order_;
  std::vector<std::shared_ptr<pool_thread_cache>> caches_;
  std::vector<event_handle> spare_events_;
  mutable std::shared_mutex chunks_mutex_;
  std::uint64_t misses_since_growth_ = 0;  // slow-path misses that merged everything back
  std::uint64_t reclaims_since_growth_ = 0;
  std::size_t held_ = 0;
  // The largest requests (rounded) that grew the pool: since the floor period began, and in the
  // period before as well (stream_growth_step_locked).
  std::size_t growth_floor_ = 0;
  std::size_t growth_floor_next_ = 0;
  bool growth_refused_ = false;  // the last growth failed (maximum_size, or the upstream refused)
  std::size_t growing_ = 0;      // bytes being taken from the upstream with mutex_ released
  // Notified (under mutex_) when a growth in flight ends (growing_ or range_.claimed_bytes went
  // down) and when the orphan synchronisation is done.
  std::condition_variable growth_done_;
  pool_range_state range_;  // expandable pools (pool_range_state.hpp)
  std::size_t peak_held_ = 0;
  // Blocks lost for want of host memory (note_lost); they stay inside their chunks until the end.
  std::atomic<std::size_t> lost_bytes_{0};
  pool_counters counts_;  // under mutex_ (pool_counters.hpp)

  struct tracked_block {
    std::size_t size;
    std::size_t requested;
  };
  mutable std::mutex tracking_mutex_;
  std::unordered_map<std::uintptr_t, tracked_block> tracked_;
  std::atomic<std::uint64_t> invalid_deallocations_{0};
};

}  // namespace gpumem::detail
