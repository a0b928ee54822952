// The shared state of a spill_manager (see spill_manager.hpp): the least-recently-used order of its
// storages, the byte counts, the two copy streams, the pinned host pool and the statistics.
// Storages and the manager share it, so a buffer outlives its manager safely.
//
// Locking: `lru_mutex_` guards the LRU list (spill_lru.hpp) and the count of storages. It is taken
// while a storage's mutex is held (a storage moves in the order when its pins change), and a walk
// for victims holds it while it TRY-locks storages, never waiting for one: a storage another thread
// is using (or this thread, inside an unspill that ran out of memory) is skipped. It is never held
// while allocating device memory or copying. `stats_mutex_` guards the statistics and is a leaf.
#pragma once

#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include "buffer_storage.hpp"
#include "host_copy.hpp"
#include "spill_lru.hpp"

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem {
class pool_resource;
}  // namespace gpumem

namespace gpumem::detail {

class counted_pinned_resource;

enum class copy_direction { to_host, to_device };

// What a spill call did: the bytes it moved, and whether any device memory it released went to the
// memory manager's deferred queue (a manager without idle frees) instead of being freed at once.
struct spill_outcome {
  std::size_t bytes = 0;
  bool queued_frees = false;
};

class spill_registry : public std::enable_shared_from_this<spill_registry> {
 public:
  spill_registry(int device, spill_options const& options);
  spill_registry(spill_registry const&) = delete;
  spill_registry& operator=(spill_registry const&) = delete;
  ~spill_registry();

  int device() const noexcept { return device_; }
  spill_options const& options() const noexcept { return options_; }

  // Registration of storages (allocate_storage; the storage's destructor).
  void add(std::shared_ptr<buffer_storage> const& storage);
  void remove(buffer_storage& storage, residence where, std::size_t bytes) noexcept;
  std::size_t count() const;

  // The LRU order; the caller holds the storage's mutex. A storage on the device whose last pin
  // went becomes the most recently used; one that is pinned, exposed or spilled leaves the order.
  void on_unpinned(buffer_storage& storage) noexcept;
  void leave_order(buffer_storage& storage) noexcept;

  // Device memory for a storage, from the device's current memory manager.
  memory_pointer allocate_device(std::size_t bytes);
  // Blocks of the pinned host pool for `bytes` (host_copy.hpp); out_of_memory when the pool cannot
  // grow. release_host gives them back (host_copy::reset).
  host_copy allocate_host(std::size_t bytes);
  void release_host(host_copy& copy) noexcept;
  // Copies `src`'s blocks to the device at `dst` and waits; returns the seconds the copy took.
  double copy_to_device(void* dst, host_copy const& src);

  // Spilling (see spill_manager). spill_for_allocation is the on-demand handler's call; it spills
  // nothing for a request above the device's total memory, which no spilling can make fit.
  spill_outcome spill_bytes(std::size_t nbytes);
  spill_outcome spill_for_allocation(std::size_t nbytes);
  spill_outcome spill_to(std::size_t limit);
  spill_outcome spill_storage(buffer_storage& storage);
  // Spills to the configured device limit, if any and while the manager lives (after a storage is
  // made or unspilled, and when a spill lock ends).
  void enforce_limit() noexcept;
  // The manager is gone: nothing spills automatically any more (buffers still unspill on use).
  void orphan() noexcept { orphaned_.store(true, std::memory_order_release); }

  // Accounting, by the storages.
  void on_unspilled(std::size_t bytes, double seconds) noexcept;
  void on_exposed(std::size_t bytes, char const* file, int line) noexcept;
  std::size_t device_bytes() const noexcept { return device_bytes_.load(); }
  std::size_t host_bytes() const noexcept { return host_bytes_.load(); }

  spill_statistics statistics() const;
  // Throws logic_error when the LRU list is inconsistent or holds a storage that is not a
  // candidate (pinned, spilled, exposed), or when the byte counts disagree with the list.
  void check_invariants() const;

 private:
  struct victim;
  // Chooses victims, least recently used first, until `enough(chosen bytes)`; each is locked.
  template <class Enough>
  std::vector<victim> choose(Enough enough);
  // Spills locked victims as one batch: one device synchronisation when any lent a pointer, host
  // blocks for all, every copy enqueued, one wait, then the device memory released.
  spill_outcome spill_batch(std::vector<victim>& victims, bool throw_without_host_memory);
  void synchronize_if_lent(std::vector<victim>& victims);
  void enqueue_to_host(host_copy const& dst, void const* src);
  void wait(copy_direction direction);

  int device_;
  spill_options options_;
  device_backend* backend_;
  stream_handle to_host_stream_ = nullptr;
  stream_handle to_device_stream_ = nullptr;
  // Recorded on the null stream before each copy to the device: the block came from memalloc, on
  // the null stream, and what was queued there before its reuse (a free in stream order, a debug
  // fill of the freed block) must come before the copy on the non-blocking to_device_stream_.
  event_handle null_stream_done_ = nullptr;
  std::unique_ptr<counted_pinned_resource> pinned_;
  std::unique_ptr<pool_resource> host_pool_;
  std::atomic<bool> orphaned_{false};
  std::size_t spill_ahead_ = 0;   // options.spill_ahead, or its default for the device
  std::size_t device_total_ = 0;  // the device's memory: a larger request never fits

  mutable std::mutex lru_mutex_;
  spill_lru lru_;
  std::size_t registered_ = 0;
  std::atomic<std::size_t> device_bytes_{0};
  std::atomic<std::size_t> host_bytes_{0};

  mutable std::mutex stats_mutex_;
  spill_statistics stats_;
  std::map<std::string, spill_statistics::exposure> exposures_;
};

}  // namespace gpumem::detail
