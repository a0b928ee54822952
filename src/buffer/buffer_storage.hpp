// The storage record behind buffer handles (see buffer.hpp): one range of memory, its kind, what
// keeps it alive — the memory manager's pointer for memory a buffer allocated, or the owner handed
// to buffer::view — and, for a TRACKED storage (spillable or copy-on-write), where the bytes are
// now, whether their address escaped, the spill locks holding them, and the count of live slices.
//
// Every handle, slice and copy of a handle shares one record. An untracked record is immutable
// after construction, so buffer::get_ptr reads its address without a lock (what a plain buffer
// costs). A tracked record keeps its moving parts under its own mutex:
//
//   residence   on_device --spill--> spilled --unspill--> on_device
//               on_device / spilled --expose--> exposed (on the device, final)
//   pins        spill locks and internal operations holding the bytes on the device
//   slices      live copy-on-write handles of this owner (a write with slices > 1 unshares)
//
// Locking: the mutex is recursive because an allocation made while holding it (unspilling) may run
// the spill-on-demand handler on the same thread, which try-locks candidate records and must find
// this one busy (it is spilled or pinned at that moment, so it is skipped). A record's mutex may be
// held while the spill registry's list mutex is taken (to move the record in the LRU order); the
// registry, holding its list mutex, only try-locks records, so the two never wait for each other
// in a cycle.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/manager/host_memory.hpp>
#include <gpumem/manager/memory_pointer.hpp>

#include "host_copy.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <variant>

namespace gpumem::detail {

class spill_registry;

// How the memory came to the buffer layer: allocated for a buffer, or existing memory viewed.
enum class buffer_origin { allocated, viewed };

// Where a tracked storage's bytes are (see the file comment for the legal transitions).
enum class residence { on_device, spilled, exposed };

// Why a tracked storage's pointer is asked for.
enum class pointer_use {
  pin,     // an internal transfer or spill_lock::hold: hold on the device until unpinned
  lend,    // a pointer handed out inside a spill lock: pin, and mark the bytes as possibly in use
           // by device work until a spill synchronises the device
  expose,  // handed out of gpumem's control: exposed for good
};

class buffer_storage : public std::enable_shared_from_this<buffer_storage> {
 public:
  // What keeps the memory alive: device or managed memory of a manager, pinned host memory, or a
  // foreign owner (may be empty).
  using keeper = std::variant<memory_pointer, host_memory, std::shared_ptr<void>>;

  // What makes a storage tracked: copy-on-write, and/or the spill registry of its spill manager.
  // `opted_out` (buffer_options::spillable = false) tracks nothing: it is kept so that copies of
  // the storage (buffer::copy, as_copy_on_write) are not adopted by a global spill manager either.
  struct tracking {
    bool copy_on_write = false;
    std::shared_ptr<spill_registry> spill;
    bool opted_out = false;
  };

  buffer_storage(void* base, std::size_t size, buffer_memory memory, buffer_origin origin,
                 keeper owner) noexcept
      : base_(base), size_(size), memory_(memory), origin_(origin), owner_(std::move(owner)) {}
  buffer_storage(void* base, std::size_t size, buffer_memory memory, buffer_origin origin,
                 keeper owner, tracking track) noexcept;
  buffer_storage(buffer_storage const&) = delete;
  buffer_storage& operator=(buffer_storage const&) = delete;
  ~buffer_storage();

  std::size_t size() const noexcept { return size_; }
  buffer_memory memory() const noexcept { return memory_; }
  buffer_origin origin() const noexcept { return origin_; }
  // True when both records keep the same allocation or the same foreign owner alive. Lock-free
  // and race-free: it reads the owner only of untracked records, which never change it.
  bool keeps_same_owner(buffer_storage const& other) const noexcept;

  bool tracked() const noexcept { return tracked_; }
  bool copy_on_write() const noexcept { return copy_on_write_; }
  bool spillable() const noexcept { return registry_ != nullptr; }
  spill_registry* registry() const noexcept { return registry_.get(); }
  // Made with buffer_options::spillable = false: never spillable, nor are its copies.
  bool opted_out_of_spilling() const noexcept { return opted_out_; }
  tracking tracking_options() const { return tracking{copy_on_write_, registry_, opted_out_}; }

  // Untracked storage only: the address, without a lock.
  void* base() const noexcept { return base_; }

  // Tracked storage: the device address, unspilling first; `use` pins or exposes (see
  // pointer_use). `file`/`line` name the caller for exposure statistics. May throw out_of_memory.
  void* acquire(pointer_use use, char const* file, int line);
  void unpin() noexcept;

  residence where() const noexcept { return residence_.load(std::memory_order_acquire); }

  // True when a pointer was lent inside a spill lock since the last device synchronisation of a
  // spill: work launched with it may still be running, so spilling it needs that synchronisation.
  // (Pins of internal transfers keep the storage pinned until their copy is done; hold() lends no
  // pointer.) The spill registry reads and clears it under the record's mutex.
  bool lent() const noexcept { return lent_; }
  void clear_lent() noexcept { lent_ = false; }

  // Copy-on-write slices of this owner.
  void add_slice() noexcept { slices_.fetch_add(1, std::memory_order_relaxed); }
  void remove_slice() noexcept { slices_.fetch_sub(1, std::memory_order_acq_rel); }
  long slices() const noexcept { return slices_.load(std::memory_order_acquire); }

  // --- for the spill registry (the caller holds the record's mutex) ---
  std::recursive_mutex& mutex() const noexcept { return mutex_; }
  // True when the record may be spilled now: on the device, unpinned, allocated by gpumem.
  bool spillable_now() const noexcept;
  // The device address (on the device only).
  void* device_address() const noexcept { return base_; }
  // Completes a spill whose copy into `host` has finished: the device memory is released, at once
  // where the memory manager supports it (memory_pointer::release_idle: the copy was waited for
  // and no other work uses the bytes); returns false when its free went to the deferred queue.
  bool finish_spill(host_copy host) noexcept;

 private:
  friend class spill_lru;
  void unspill_locked();

  void* base_;
  std::size_t size_;
  buffer_memory memory_;
  buffer_origin origin_;
  // Replaced by a spill and an unspill (under mutex_) in a tracked record; fixed in others.
  keeper owner_;
  bool opted_out_ = false;

  // Tracked storage only.
  bool tracked_ = false;
  bool copy_on_write_ = false;
  std::shared_ptr<spill_registry> registry_;
  mutable std::recursive_mutex mutex_;
  std::atomic<residence> residence_{residence::on_device};
  host_copy host_;  // the bytes while spilled
  int pins_ = 0;
  bool lent_ = false;  // under mutex_
  std::atomic<long> slices_{0};
  // The spill registry's least-recently-used list (spill_lru.hpp), under the registry's list
  // mutex: linked while on the device and unpinned, so every linked record is a candidate.
  buffer_storage* lru_prev_ = nullptr;
  buffer_storage* lru_next_ = nullptr;
  bool lru_linked_ = false;
};

// A tracked storage's device address held for the life of this object (an internal operation).
class storage_pin {
 public:
  explicit storage_pin(std::shared_ptr<buffer_storage> storage)
      : storage_(std::move(storage)), address_(storage_->acquire(pointer_use::pin, nullptr, 0)) {}
  storage_pin(storage_pin const&) = delete;
  storage_pin& operator=(storage_pin const&) = delete;
  ~storage_pin() { storage_->unpin(); }
  void* address() const noexcept { return address_; }

 private:
  std::shared_ptr<buffer_storage> storage_;
  void* address_;
};

// A new storage of `bytes` of `memory` from the current context's manager (or, when `track` has a
// spill registry, from its device's manager, registered with it).
std::shared_ptr<buffer_storage> allocate_storage(std::size_t bytes, buffer_memory memory,
                                                 buffer_storage::tracking track);

}  // namespace gpumem::detail
