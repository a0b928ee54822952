// spill_registry (see spill_registry.hpp): registration, the LRU order, choosing victims and
// spilling them in batches, the device limit, and the structure check. The copies, the host pool
// and the statistics are in spill_transfers.cpp.
//
// A batch spill: walk the LRU list from its front under the list mutex, try-locking each storage
// and keeping it locked while its bytes count towards the target (every linked storage is on the
// device and unpinned, so the walk costs about the victims, not every buffer); release the list
// mutex; synchronise the device once if any victim lent a pointer inside a spill lock since the
// last such synchronisation (its bytes may still be used by work on any stream; a synchronisation
// would also wait for the unspill copies of other threads, so it is skipped when no victim needs
// it); take host blocks for every victim; enqueue all copies on the to-host stream and wait for it
// once; then release each victim's device memory and unlock. The device memory is idle then (its
// copy was waited for, and work on other streams was finished or ordered before the
// synchronisation), so it is freed at once (memory_pointer::release_idle) where the memory manager
// supports it: no deferred queue, whose flush would synchronise the whole device and so wait for
// the other direction's copies. Copies of several victims pipeline, and a copy in the other
// direction (an unspill on another thread) overlaps them.
#include "spill_registry.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

namespace gpumem::detail {

struct spill_registry::victim {
  std::shared_ptr<buffer_storage> storage;  // destroyed last: after the lock is released
  std::unique_lock<std::recursive_mutex> lock;
  host_copy host;
};

void spill_registry::add(std::shared_ptr<buffer_storage> const& storage) {
  std::lock_guard<std::recursive_mutex> held(storage->mutex());
  std::lock_guard<std::mutex> lock(lru_mutex_);
  ++registered_;
  device_bytes_.fetch_add(storage->size());
  lru_.push_back(*storage);
}

void spill_registry::remove(buffer_storage& storage, residence where, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(lru_mutex_);
  lru_.unlink(storage);
  --registered_;
  if (where == residence::spilled) {
    host_bytes_.fetch_sub(bytes);
  } else {
    device_bytes_.fetch_sub(bytes);
  }
}

std::size_t spill_registry::count() const {
  std::lock_guard<std::mutex> lock(lru_mutex_);
  return registered_;
}

void spill_registry::on_unpinned(buffer_storage& storage) noexcept {
  std::lock_guard<std::mutex> lock(lru_mutex_);
  lru_.push_back(storage);
}

void spill_registry::leave_order(buffer_storage& storage) noexcept {
  std::lock_guard<std::mutex> lock(lru_mutex_);
  lru_.unlink(storage);
}

template <class Enough>
std::vector<spill_registry::victim> spill_registry::choose(Enough enough) {
  std::vector<victim> victims;
  std::lock_guard<std::mutex> list(lru_mutex_);
  std::size_t chosen = 0;
  for (buffer_storage* s = lru_.front(); s != nullptr && !enough(chosen); s = spill_lru::next(*s)) {
    // A linked storage is alive while the list mutex is held: its destructor unlinks it under
    // this mutex before anything of it goes. The slot is made first, so that nothing below can
    // throw while a storage's last reference is in hand (dropping it here would run that
    // destructor, which needs this mutex).
    victims.emplace_back();
    victim& v = victims.back();
    v.lock = std::unique_lock<std::recursive_mutex>(s->mutex(), std::try_to_lock);
    if (v.lock.owns_lock() && s->spillable_now()) v.storage = s->weak_from_this().lock();
    if (v.storage == nullptr) {  // busy, or being destroyed
      victims.pop_back();
      continue;
    }
    chosen += s->size();
  }
  return victims;
}

void spill_registry::synchronize_if_lent(std::vector<victim>& victims) {
  // A victim whose pointer was lent inside a spill lock may still be read or written by work on
  // any stream (spill_lock.hpp: work is finished, or ordered by this synchronisation, before the
  // lock goes). Victims only pinned by transfers or holds have no such work, and a device-wide
  // synchronisation would also wait for the other direction's copies: it is skipped for them.
  bool lent = false;
  for (victim const& v : victims)
    lent = lent || v.storage->lent();
  if (!lent) return;
  auto const start = std::chrono::steady_clock::now();
  backend_->synchronize();
  std::chrono::duration<double> const took = std::chrono::steady_clock::now() - start;
  for (victim& v : victims)
    v.storage->clear_lent();
  if (options_.statistics_level < 1) return;
  std::lock_guard<std::mutex> lock(stats_mutex_);
  ++stats_.synchronizations;
  stats_.synchronize_seconds += took.count();
}

spill_outcome spill_registry::spill_batch(std::vector<victim>& victims,
                                          bool throw_without_host_memory) {
  spill_outcome out;
  if (victims.empty()) return out;
  scoped_device on_device(device_);
  synchronize_if_lent(victims);
  std::size_t ready = 0;
  for (victim& v : victims) {
    try {
      v.host = allocate_host(v.storage->size());
    } catch (out_of_memory const&) {
      if (ready == 0 && throw_without_host_memory) throw;
      break;  // no host memory for more: spill those that have blocks
    }
    ++ready;
  }
  if (ready == 0) return out;
  auto const start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < ready; ++i)
    enqueue_to_host(victims[i].host, victims[i].storage->device_address());
  wait(copy_direction::to_host);
  std::chrono::duration<double> const took = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard<std::mutex> lock(lru_mutex_);
    for (std::size_t i = 0; i < ready; ++i)
      lru_.unlink(*victims[i].storage);
  }
  for (std::size_t i = 0; i < ready; ++i) {
    buffer_storage& s = *victims[i].storage;
    std::size_t const bytes = s.size();
    if (!s.finish_spill(std::move(victims[i].host))) out.queued_frees = true;
    device_bytes_.fetch_sub(bytes);
    host_bytes_.fetch_add(bytes);
    out.bytes += bytes;
  }
  if (options_.statistics_level >= 1) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.spilled_bytes += out.bytes;
    stats_.spill_seconds += took.count();
    ++stats_.spill_count;
    stats_.spilled_buffers += ready;
  }
  return out;
}

spill_outcome spill_registry::spill_bytes(std::size_t nbytes) {
  if (nbytes == 0) return {};
  std::vector<victim> victims = choose([nbytes](std::size_t chosen) { return chosen >= nbytes; });
  return spill_batch(victims, false);
}

spill_outcome spill_registry::spill_for_allocation(std::size_t nbytes) {
  if (orphaned_.load(std::memory_order_acquire)) return {};
  // More than the whole device: the retry fails whatever goes, so nothing is spilled for it.
  if (nbytes > device_total_) return {};
  return spill_bytes(std::max(nbytes, spill_ahead_));
}

spill_outcome spill_registry::spill_to(std::size_t limit) {
  std::vector<victim> victims = choose([this, limit](std::size_t chosen) {
    std::size_t const on_device = device_bytes_.load();
    return on_device <= chosen || on_device - chosen <= limit;
  });
  return spill_batch(victims, false);
}

spill_outcome spill_registry::spill_storage(buffer_storage& storage) {
  if (storage.registry() != this) return {};
  std::vector<victim> one;
  one.emplace_back();
  one.back().lock = std::unique_lock<std::recursive_mutex>(storage.mutex());
  if (!storage.spillable_now()) return {};
  one.back().storage = storage.shared_from_this();
  return spill_batch(one, true);
}

void spill_registry::enforce_limit() noexcept {
  if (!options_.device_limit || orphaned_.load(std::memory_order_acquire)) return;
  std::size_t const limit = *options_.device_limit;
  std::size_t const on_device = device_bytes_.load();
  if (on_device <= limit) return;
  try {
    // Ahead of the limit by spill_ahead, at most an eighth of the limit (when that much can go),
    // so that the next allocations stay under it without a batch each.
    std::size_t const ahead = std::max(on_device - limit, std::min(spill_ahead_, limit / 8));
    std::vector<victim> victims = choose([this, limit, ahead](std::size_t chosen) {
      std::size_t const now = device_bytes_.load();
      return now <= chosen || (now - chosen <= limit && chosen >= ahead);
    });
    spill_batch(victims, false);
  } catch (std::exception const& e) {
    // A soft limit: failing to meet it is not an error of the operation that triggered it.
    log(log_level::warn,
        std::string("spill manager: spilling to the device limit failed: ") + e.what());
  }
}

void spill_registry::check_invariants() const {
  std::lock_guard<std::mutex> lock(lru_mutex_);
  std::size_t linked = 0;
  std::size_t linked_bytes = 0;
  buffer_storage const* previous = nullptr;
  for (buffer_storage* s = lru_.front(); s != nullptr; s = spill_lru::next(*s)) {
    GPUMEM_EXPECTS(
        spill_lru::linked(*s) && spill_lru::previous(*s) == previous,
        "spill_registry: the LRU list's links are inconsistent at entry " + std::to_string(linked));
    GPUMEM_EXPECTS(s->registry() == this, "spill_registry: a storage of another manager is listed");
    std::unique_lock<std::recursive_mutex> held(s->mutex(), std::try_to_lock);
    if (held.owns_lock())  // a storage in use may be between two states
      GPUMEM_EXPECTS(s->spillable_now(), "spill_registry: a listed storage of " +
                                             std::to_string(s->size()) +
                                             " bytes is pinned, spilled or exposed");
    linked_bytes = saturating_add(linked_bytes, s->size());
    previous = s;
    ++linked;
  }
  GPUMEM_EXPECTS(linked == lru_.size() && linked <= registered_,
                 "spill_registry: the LRU list holds " + std::to_string(linked) +
                     " storages, counts " + std::to_string(lru_.size()) + ", of " +
                     std::to_string(registered_) + " registered");
  GPUMEM_EXPECTS(linked_bytes <= device_bytes_.load(),
                 "spill_registry: the listed storages hold " + std::to_string(linked_bytes) +
                     " bytes, more than the device bytes " + std::to_string(device_bytes_.load()));
}

}  // namespace gpumem::detail
