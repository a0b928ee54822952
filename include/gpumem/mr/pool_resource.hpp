// gpumem/mr/pool_resource.hpp
//
// The fast stream-ordered pool: memory is taken from an upstream resource in chunks and handed out
// again and again without going back to it.
#pragma once

#include <gpumem/core/units.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace gpumem {

namespace detail {
class pool_state;
}  // namespace detail

// Creation-time settings of a pool_resource.
struct pool_options {
  // Taken from the upstream at construction (0: grow on first use).
  std::size_t initial_size = 0;
  // Growth step: a miss takes max(step × n, the request rounded to 2 MiB) from the upstream, where
  // step is half of what the pool holds (2 MiB at first) up to chunk_size, and n (at least 1) is
  // the number of streams that ran short of memory they could use at once since the pool last
  // grew: a growth leaves room for all of them, so that their next misses need no upstream call of
  // their own. For n > 1 the step × n is held to max(step, held / streams seen, rounded down to
  // 2 MiB), since such streams may grow at the same moment. Refused, a growth tries chunk_size,
  // then the request. A pool used from one stream grows by step. A chunked pool's step is also at
  // least the largest request it has grown for lately (its last 16 to 32 growths; trim() forgets
  // it), rounded to 2 MiB, at most 8 × chunk_size: chunks never merge, and a chunk smaller than the
  // workload's largest blocks could not serve them. Steps use chunk_size rounded down to 256 bytes.
  std::size_t chunk_size = 32 * MiB;
  // The pool never holds more than this from the upstream (rounded down to 256 bytes, the pool's
  // granularity; an initial_size above that is held to it).
  std::size_t maximum_size = std::numeric_limits<std::size_t>::max();
  // Requests up to this size are rounded to a size class and cached per thread; larger ones are
  // served exactly (256-byte granularity) by the coalescing best fit. At most 4 GiB; below 256
  // bytes (the smallest class), nothing is cached. Caching trades memory for time: a cached block
  // freed waits in its thread's stack and its stream's lists for a request of its class, where a
  // larger block goes to the best fit and merges with its free neighbours at once. On loops whose
  // shapes change every step most such blocks are never asked for again, and the memory they park
  // stays out of reach of the larger blocks that follow. Measured on an H200 (bench_alloc
  // --max-cached-size, 1/4/16 threads, held / live): the training loop held 1.37/1.53/1.92 with
  // 4 MiB, 1.19/1.17/1.24 with 256 KiB, while a pair of the mixed trace (1 KiB-4 MiB) took 143 ns
  // on one thread and 7.5 on 16 with 4 MiB, 232 and 23.5 with 256 KiB (docs/mr.md). Raise it where
  // blocks of 256 KiB-4 MiB come and go at a high rate and shapes do not change.
  std::size_t max_cached_size = 256 * KiB;
  // Per thread, stream and size class, a thread cache keeps at most this many bytes (and between
  // 4 and 32 blocks whatever their size); for classes of 1 MiB and more (with max_cached_size
  // raised that far), at most 2 MiB (and at least one block).
  std::size_t thread_cache_class_bytes = 4 * MiB;
  // Once this many bytes freed on one stream wait for reuse by other streams, the pool records ONE
  // event on that stream for all of them (a fence); for blocks above max_cached_size, once this
  // many or an eighth of what the pool holds, whichever is more. Fences are also made on demand,
  // when another stream runs short.
  std::size_t fence_bytes = 64 * MiB;
  // Before taking a new chunk, give back to the upstream every chunk that is completely free, or
  // completely free but for extents freed on the calling stream (in that stream's order, so the
  // upstream may wait for it: cuda_resource synchronises the stream, and cudaFree waits for the
  // device), and was found so by an earlier growth too (one free at a single growth is often
  // taken again by the loop's next round: giving it back would cost a cudaFree and a cudaMalloc per
  // round). Such chunks are too small for the request, and keeping them is what makes a workload
  // whose sizes change (a training loop with varying shapes) hold far more than it uses. For an
  // expandable pool: a growth may wait for the calling stream, when what that stream freed is at
  // least the request and its work is still running, so that the pages under that memory can move
  // (expandable below). false: chunks go back only on trim() and destruction, and growth never
  // waits (needed when the calling stream may be blocked by a host function that waits for the
  // allocating thread).
  bool trim_before_growth = true;
  // Chunked pools: before it grows, a stream short of memory takes a free extent that fits from
  // another stream (the smallest such fit; the whole extent moves) and is made to wait, on the
  // device, for the work queued on that stream so far (an event recorded there,
  // cudaStreamWaitEvent), as cudaMallocAsync's pools do by default. Less memory held with many
  // streams, at a cost in time: each such miss records an event and adds a wait under the pool's
  // mutex (12 us on an H100 with 16 threads), and orders the two streams' work at that point
  // (docs/mr.md has the figures). Never with a stream being captured into a graph, nor from
  // another thread's per-thread default stream or the legacy default stream. false (the default):
  // memory freed on one stream reaches the others only through fences found complete, and the
  // pool never orders streams' work.
  bool wait_across_streams = false;
  // true: the pool may ask any stream it has seen about its work, from a call made on another
  // stream (is it idle; a fence recorded on it now), so that memory one stream freed reaches the
  // others sooner when several streams allocate at once (docs/benchmarks.md has the figures). The
  // promise it rests on: every stream is given back with release_stream(s) before it is
  // destroyed, as gpumem::stream and the Python bridges do; on CUDA a call on a destroyed stream's
  // handle crashes the process. false (the default): a created stream's handle is used only in
  // calls made on that stream, and streams may be destroyed at any time.
  bool query_other_streams = false;
  // Grow inside one reserved virtual address range (CUDA's virtual memory management; PyTorch's
  // "expandable segments") instead of taking chunks from the upstream: the pool's memory is one
  // chunk, backed page by page (page_size), so a large request needs only the pages that the free
  // memory around some place lacks: at the free end of the range, or in a hole (unmapped pages)
  // with the free memory on either side. A growth first unmaps whole pages lying in free memory
  // elsewhere in the range (free for every stream, or freed on the calling stream once its work is
  // done up to them) and maps their physical memory where it is needed; only what they lack is new
  // memory. So what the pool holds (the bytes mapped: statistics().held_bytes) follows what is
  // live as shapes change, and holes cost address space, not memory. trim() unmaps every whole page
  // of free memory. The range is twice as large as the device (or maximum_size); physical memory
  // comes from the backend's device, not the upstream. When the range is full, growth falls back
  // to upstream chunks. Blocks of an expandable pool cannot be exported with legacy CUDA IPC.
  // Throws gpumem::not_supported at construction when the backend has no virtual memory
  // management.
  bool expandable = false;
  // Expandable pools: the page, rounded up to the backend's granularity (2 MiB). Each page is one
  // physical allocation and one mapping (on an H100, mapping one takes about 27 us, unmapping 18
  // us, whatever its size up to 8 MiB): larger pages make fewer calls when memory moves, smaller
  // ones give back more of the free memory between live blocks (up to a page on either side of
  // each free extent stays). At most 1 GiB.
  std::size_t page_size = 4 * MiB;
  // Expandable pools: a growth takes new memory while the pool then holds at most this multiple of
  // the most it has had live at a growth (the bytes live then, with the request); beyond, it moves
  // the memory under free pages instead. 1 moves whenever free pages allow; infinity never moves
  // (the pool then holds what a range that only grows at its end would). A move costs a backend
  // unmap and map per page, so the target trades memory for time where shapes keep changing. At
  // least 1.
  double held_target = 1.125;
  // Expandable pools: when growths that move memory come more often than once per 128
  // allocations over sixteen of them (streams that each keep what they freed, taking memory from
  // each other in turn: each move leaves another stream short), the pool raises the target it
  // uses by an eighth, and again while that goes on, up to this; trim() restores held_target. At
  // or below held_target: never raised. At least 1.
  double held_target_most = 4.5;
  // Records every live block with the size asked for: check_invariants() then proves an exact
  // cover of every chunk, and a double free, a foreign pointer or a free with another size than
  // the one asked for (even one of the same size class) is caught instead of corrupting the pool:
  // logged at error level with the pointer and the sizes, counted in invalid_deallocations, and
  // ignored (the block stays live). Costs a mutex per call: for tests and debugging. Without it,
  // frees above max_cached_size are still checked exactly, but a free of a cached size with a
  // pointer the pool did not hand out (foreign, or inside a live block beyond its first 256 KiB)
  // is not seen, and a second free of a block of a cached size is caught only while the block is
  // among the last four freed to the calling thread's stack for that size class (docs/mr.md,
  // "Refused frees").
  bool track_blocks = false;
  // Streams and events are those of this backend (null: gpumem::backend()).
  device_backend* backend = nullptr;
};

// What pool_resource::close() does with the chunks that still hold live blocks.
enum class pool_live_chunks {
  // Given back to the upstream when the pool is destroyed (after the last live block is freed):
  // the device's context lives on (a manager replaced by another).
  give_back_at_destruction,
  // Never given back: the device's context is about to be reset, which frees them; giving them
  // back by address afterwards could free memory of the next context at a reused address.
  abandon,
};

// A snapshot of a pool. Exact when no other thread is using the pool; otherwise the per-thread
// counters may lag by the operations in flight.
struct pool_statistics {
  std::size_t held_bytes = 0;  // taken from the upstream, in `chunks` chunks
  std::size_t peak_held_bytes = 0;
  std::size_t chunks = 0;
  std::size_t live_bytes = 0;          // handed out (block sizes, after rounding)
  std::size_t requested_bytes = 0;     // handed out, as requested
  std::size_t free_bytes = 0;          // in the coalesced free structures (any stream may use)
  std::size_t stream_bytes = 0;        // freed, reusable only on their stream until an event says
  std::size_t cached_bytes = 0;        // in thread caches and per-stream class lists
  std::size_t largest_free_block = 0;  // in the free structures
  std::uint64_t allocations = 0;
  std::uint64_t deallocations = 0;
  std::uint64_t events_recorded = 0;  // fences: one event for a whole batch of frees
  std::uint64_t events_completed = 0;
  // Questions to the device about fences and streams (cudaEventQuery, cudaStreamQuery), each made
  // with the pool's mutex held.
  std::uint64_t device_queries = 0;
  // Host waits for the device or a stream: trim, orphaned streams (on the pool's own thread), the
  // out-of-memory path, release_stream and frees on released streams, an expandable pool's growth
  // waiting for the calling stream.
  std::uint64_t synchronizations = 0;
  // Misses served from another stream's free memory, the allocating stream made to wait on the
  // device (cudaStreamWaitEvent on that stream's fence) instead of growing.
  std::uint64_t stream_waits = 0;
  // Misses served from the free memory of another stream that was idle on the device (no work
  // queued: cudaStreamQuery; only the calling thread's per-thread default stream may be asked),
  // that block alone (with a slab for a cached size), instead of a
  // reclaim or a growth.
  std::uint64_t idle_takes = 0;
  std::uint64_t upstream_allocations = 0;
  std::uint64_t upstream_deallocations = 0;
  // Frees ignored as invalid (each also logged at error level): caught by track_blocks, after
  // close() beyond what was live then, a block above max_cached_size that is not live or is freed
  // with another size, a live one freed with a cached size, a cached-size block freed again while
  // still among the last on the thread's stack, and a range that overlaps free memory (not a large
  // block freed again with a cached size once it is gone: docs/mr.md, "Refused frees").
  std::uint64_t invalid_deallocations = 0;
  // Allocations and deallocations that took the pool's shared mutex (slabs for a stream's arena,
  // large blocks, flushes): per allocate+free pair, this is what limits scaling.
  std::uint64_t lock_acquisitions = 0;
  // Of those, the large-block path's (allocate and free of a block that missed the stream's own
  // extents): nanoseconds spent waiting for the mutex and holding it, all threads together (the
  // hold includes a growth's upstream call, made without the mutex).
  std::uint64_t large_lock_wait_ns = 0;
  std::uint64_t large_lock_hold_ns = 0;
  // Misses that took back the blocks other streams had parked (quiet streams, when those parked at
  // least half of what the pool held, at most once per growth; and every stream before
  // out-of-memory).
  std::uint64_t reclaims = 0;
  // Expandable pools: pages of the range mapped and unmapped (one backend call each; the memory of
  // an unmapped page is mapped again where a growth needs it before any is created).
  std::uint64_t pages_mapped = 0;
  std::uint64_t pages_unmapped = 0;
  // Streams the pool keeps state for (a stream seen, a per-thread default stream per thread that
  // used it and has not exited or still owns memory).
  std::size_t streams = 0;
};

// A pool over any upstream memory_resource.
//
// Structure. Requests up to `max_cached_size` are rounded to a size class (≤ 12.5% larger). Each
// thread keeps, per pool and stream, a bounded stack of free blocks per class: the common
// allocate/deallocate touches only that stack (no lock, no atomic read-modify-write). Stacks
// overflow to and refill from per-stream class lists in batches; with max_cached_size raised to 1
// MiB or more, a stream's lists of classes of 1 MiB and more hold at most 8 MiB or 1/32 of the
// pool, whichever is more (past that they merge back into its extents), so that blocks of shapes
// gone by serve the next shapes instead of making the pool grow. Behind those, free memory is a
// coalescing best fit: extents ordered by address (for merging) and binned by size (16 bins per
// power of two, a bitmap of the bins in use: the smallest fit in a few bit scans), never merged
// across chunks, in one set per owner: each stream's own (its *arena*, with its class lists), and
// the free ones. A stream carves new blocks from its arena, and takes a slab (up to 8 MiB) of the
// free extents when its arena runs dry. Larger requests are carved from the stream's own extents,
// and freed back there, under its lock alone too; a miss goes to the best fit of the free extents
// under the pool's mutex.
//
// Stream semantics (memory_resource's contract, by construction). Every freed block is owned by
// the stream it was freed on, and only that stream may reuse it, at once. Freed extents carry the
// stream's current epoch; a fence records ONE event on the stream, covering every extent handed
// back before it. Blocks parked in a stream's class lists need no fence (no other stream may take
// them there): they join the stream's extents, under a later fence, only when some stream runs
// short. When that event has completed
// (queried, without waiting), the stream's extents up to that epoch become free for all streams and
// merge with their neighbours. Extents are merged only with extents of the same owner (a merged
// extent takes the later epoch), so a block pending on one stream never leaks to another through
// coalescing. Fences happen when a stream's waiting bytes pass `fence_bytes`, or, in the stream's
// next call, when another stream ran short while this one was quiet; a device synchronisation
// happens only in trim(), for streams no thread uses any more that hold a quarter of the pool, and
// as the last resort before out-of-memory.
// statistics() counts events so that tests prove there is no event per free.
//
// On the per-thread default stream (cudaStreamPerThread: one handle naming a different stream in
// each thread) the owner is the (handle, thread) pair, the thread known by a serial that is never
// reused (a new thread often gets the id of a joined one), and only the owning thread fences it.
// When that thread exits, what it freed there is fenced (or freed, if its stream is idle), and the
// pool forgets the stream once that memory is free for all.
//
// Device: the pool belongs to the device current when it was constructed. It grows, records
// events, synchronises and gives memory back on that device whichever device the calling thread
// has current (and leaves the caller's device as it was); the streams passed to it must belong to
// that device.
//
// Streams: the pool uses a stream's handle (queries it, records or waits on it) only inside a call
// that names that stream (allocate, deallocate, release_stream); the legacy default stream at any
// time, the per-thread default stream only from its own thread. Any use of a destroyed stream's
// handle is undefined on CUDA (driver 580 kills the process), and streams are destroyed without
// telling the pool: another stream's memory is reached through the fences that stream recorded in
// its own calls (asked of quiet streams when another runs short: fence_wanted), or through a device
// synchronisation (trim, a miss when streams no thread's stack names hold a quarter of the pool,
// the out-of-memory path). A stream destroyed without release_stream costs memory held until
// then, never a crash. release_stream(s) before destroying s still gives s's memory back at once.
// The pool keys its per-stream state (arenas, fences, the threads' stacks) by
// device_backend::stream_id (cuStreamGetId), which is never reused, not by handle: a stream
// created later at a destroyed stream's address starts with nothing of the old one's, and the old
// one's entry goes once empty and no thread's stack names it (rmm#649). A thread keeps stacks for
// at most 32 streams per pool. Allocations ask the id; a free finds the calling thread's last
// cache by handle, and a fence checks the id (docs/mr.md).
//
// Thread safety. All members may be called from any thread. The per-thread stacks are private to
// their thread (thread_local, keyed by pool and stream). Each stream's arena has its own lock: a
// stack refills from and overflows to its stream's lists, and carves new blocks from its stream's
// extents, without the pool's mutex, so threads on separate streams do not meet until an arena
// runs dry. Everything else shared (chunks, free extents, fences, growth) is under one mutex, taken
// for slabs, for large blocks and on the slow paths. A thread's
// stacks go back to the pool when the thread exits (frees after that, from other thread_local
// destructors, take the shared path); trim() and the out-of-memory path flush the calling thread's
// stacks at once and ask other threads to flush theirs at their next call. check_invariants() and
// exact statistics() need a quiescent pool.
//
// A miss (no fit for a block) tries, in order, under the stream's lock alone: its extents; a block
// of a larger class cut up; its cold class lists merged back (those not used since its previous
// miss); all of its lists (at most 8 times per growth it makes). Then under the pool's mutex: a
// slab of the free extents (for a block above max_cached_size in a chunked pool that can still
// grow a step: while another stream allocates too, the block and the stream's growth step with
// it, at most its share of the pool, so that its next blocks need no mutex and streams do not
// interleave their blocks in one extent; in a pool that has no other stream, the whole extent, so
// that what the stream frees next to the rest merges with it); free extents adjacent to its own
// merged into them;
// completed fences of every stream; the calling thread's caches. Blocks parked by OTHER streams are
// reclaimed before growing only from streams that have not allocated since the pool last grew
// (quiet: done, or only freeing) and only when those park at least half of what the pool holds (at
// most once per growth): taking blocks from a stream that is still allocating only moves the miss
// to it, so the pool grows instead and each stream keeps what it uses. Before growing
// (trim_before_growth), every chunk found unused by this growth and an earlier one (free, or free
// but for extents of the calling stream) goes back to the upstream (only chunks with a free extent
// at their base are looked at). An expandable pool grows by moving the memory under whole free
// pages of its range to where the request fits (pool_options::expandable). A pool too tight for its
// workload would merge its lists back on almost every miss (and then carve the merged memory up
// again): after 8 such misses under the mutex since the last growth, the next one grows the pool
// instead (still within maximum_size, still trimming first). A growth takes chunk_size for every
// stream that ran short since the last one, up to the pool's share per stream
// (pool_options::chunk_size): with many streams allocating, it leaves room for the next misses of
// all of them, where each would otherwise make its own upstream call (concurrent cudaMalloc calls
// wait for each other in the driver).
//
// Out of memory: after the calling thread's caches are flushed, every stream (quiet or not) is
// reclaimed, every stream is waited for, and empty chunks are given back and growth retried, the
// pool throws gpumem::out_of_memory naming the request, what it holds, the largest free block and
// the fragmentation.
//
// Ownership: the pool owns its chunks and gives them back to the upstream on trim() and
// destruction; the upstream must outlive the pool. Destroying the pool with blocks still live
// gives their memory back too (and logs how many bytes were live).
class pool_resource final : public memory_resource {
 public:
  explicit pool_resource(memory_resource& upstream, pool_options options = {});
  ~pool_resource() override;

  std::string name() const override;
  // Free: what the pool could still hand out without exceeding its maximum, as far as the
  // upstream allows; total: the maximum (or the upstream's total).
  memory_info get_memory_info() const override;
  // The pool belongs to the device current at its construction and makes it current itself for
  // every device call (growth, trim, fences): callers need not.
  bool selects_own_device() const noexcept override { return true; }
  int own_device() const noexcept override;  // the device current at its construction
  // pool_options::backend: the backend of the pool's streams and events (not the upstream's).
  device_backend* backend_in_use() const noexcept override;

  pool_statistics statistics() const;
  // Full validator: every byte of every chunk is in exactly one of live (track_blocks only; else by
  // totals), free, owned by a stream, cached; no overlaps; every index agrees with the others.
  // Throws gpumem::logic_error naming the first violation. Needs a quiescent pool.
  void check_invariants() const;
  // Applies completed fences and gives every completely free chunk back to the upstream; returns
  // the bytes given back. When a created stream (one this call may not ask about) holds memory that
  // no completed fence covers, the device is synchronised first (without the pool's mutex), as
  // cudaFree waits for the device: do not trim while device work waits for the calling thread.
  std::size_t trim();
  // Waits for `stream` and makes everything freed on it free for all streams; call before
  // destroying a stream the pool has seen, after the last free on it. Other threads' stacks for it
  // go back at their next miss, and the pool then forgets the stream. Allocating on it again (while
  // it lives) is allowed and undoes the release. Blocks of the stream still live may be freed on
  // it later: such a free synchronises the stream and keeps nothing of it (the pool never touches
  // the stream again), so it may be destroyed right after its last free (docs/mr.md).
  void release_stream(stream_handle stream);
  // Ends the pool's use of its device, one way, while the device's context is alive (a memory
  // manager's close: gpumem::close(device), Numba's cuda.close()). Waits for the device, makes
  // every freed block free, gives back every chunk without a live block, and destroys the pool's
  // events and its own stream. Afterwards allocate() throws logic_error, and a free of a block
  // still live only counts it (in statistics(): no longer live, one more deallocation): it names no
  // stream and makes no device call (the stream, like the context, may be gone by then). Such frees
  // are still checked: with track_blocks as before close(); without, a free that would take the
  // frees since close() past the blocks or bytes live at close() is logged and counted in
  // invalid_deallocations instead (a double free cannot be told from a free of a live block
  // before that). The chunks
  // still holding live blocks are treated as `live` says. Idempotent (the first call's `live`
  // holds). Must not race with other calls on the pool.
  void close(pool_live_chunks live);

  pool_options const& options() const noexcept;
  memory_resource& upstream() const noexcept;

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;

  std::unique_ptr<detail::pool_state> state_;
};

}  // namespace gpumem
