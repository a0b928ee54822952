// The shared state of a spill_manager (see spill_manager.hpp): the weak list of its storages, the
// byte counts, the two copy streams, the pinned host pool and the statistics. Storages and the
// manager share it, so a buffer outlives its manager safely.
//
// Locking: `mutex_` guards the list and the statistics and is a leaf — never held while a storage's
// mutex is taken, nor while allocating or copying. Victims are chosen from a snapshot of the list,
// least recently used first, and locked with try_lock: a storage another thread is using (or this
// thread, inside an unspill that ran out of memory) is skipped, never waited for.
#pragma once

#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include "buffer_storage.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gpumem {
class memory_resource;
class pinned_host_resource;
class pool_resource;
}  // namespace gpumem

namespace gpumem::detail {

enum class copy_direction { to_host, to_device };

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
  void remove(buffer_storage const* storage, residence where, std::size_t bytes) noexcept;
  std::size_t count() const;
  std::uint64_t tick() noexcept { return clock_.fetch_add(1, std::memory_order_relaxed) + 1; }

  // Device memory for a storage, from the device's current memory manager.
  memory_pointer allocate_device(std::size_t bytes);
  // A block of the pinned host pool.
  host_block allocate_host(std::size_t bytes);
  void release_host(void* ptr, std::size_t bytes) noexcept;
  // Copies in pieces on the direction's stream and waits for them.
  void copy(void* dst, void const* src, std::size_t bytes, copy_direction direction);
  // Enqueues without waiting / waits for the direction's stream.
  void enqueue_copy(void* dst, void const* src, std::size_t bytes, copy_direction direction);
  void wait(copy_direction direction);

  // Spilling (see spill_manager). `limit`: spill until device bytes <= limit.
  std::size_t spill_bytes(std::size_t nbytes);
  std::size_t spill_to(std::size_t limit);
  bool spill_storage(buffer_storage& storage);
  // Spills to the configured device limit, if any (after a storage is made or unspilled).
  void enforce_limit() noexcept;

  // Accounting, by the storages.
  void on_unspilled(std::size_t bytes, double seconds) noexcept;
  void on_exposed(std::size_t bytes, char const* file, int line) noexcept;
  std::size_t device_bytes() const noexcept { return device_bytes_.load(); }
  std::size_t host_bytes() const noexcept { return host_bytes_.load(); }

  spill_statistics statistics() const;

 private:
  // Spills victims (LRU) until `enough` says so; returns the bytes spilled.
  template <class Enough>
  std::size_t spill_victims(Enough enough);
  // Synchronises the device once when any of the (locked) storages has lent a pointer since the
  // last such synchronisation, and clears their marks.
  template <class It, class Storage>
  void synchronize_if_lent(It first, It last, Storage storage_of);

  int device_;
  spill_options options_;
  device_backend* backend_;
  stream_handle to_host_stream_ = nullptr;
  stream_handle to_device_stream_ = nullptr;
  std::unique_ptr<pinned_host_resource> pinned_;
  std::unique_ptr<pool_resource> host_pool_;

  mutable std::mutex mutex_;
  std::unordered_map<buffer_storage const*, std::weak_ptr<buffer_storage>> storages_;
  std::atomic<std::uint64_t> clock_{0};
  std::atomic<std::size_t> device_bytes_{0};
  std::atomic<std::size_t> host_bytes_{0};

  // Statistics (under mutex_).
  spill_statistics stats_;
  std::map<std::string, spill_statistics::exposure> exposures_;
};

}  // namespace gpumem::detail
