// spill_registry (see spill_registry.hpp): victims, copies in pieces, the pinned host pool and the
// statistics of one spill manager.
//
// A batch spill: snapshot the list under the registry's mutex; order it by last use; try-lock each
// candidate that is spillable now and keep it locked while its bytes count towards the target;
// synchronise the device once if any victim lent a pointer inside a spill lock since the last such
// synchronisation (its bytes may still be used by work on any stream; a synchronisation would
// also wait for the unspill copies of other threads, so it is skipped when no victim needs it);
// allocate a
// host block per victim and enqueue all copies on the to-host stream; wait for that stream once;
// then release each victim's device memory and unlock. Copies of several victims therefore
// pipeline, and a copy in the other direction (an unspill on another thread) overlaps them.
#include "spill_registry.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::detail {

spill_registry::spill_registry(int device, spill_options const& options)
    : device_(device), options_(options), backend_(&backend()) {
  GPUMEM_EXPECTS(options.statistics_level >= 0 && options.statistics_level <= 2,
                 "spill_options: statistics_level " + std::to_string(options.statistics_level) +
                     " is not 0, 1 or 2");
  GPUMEM_EXPECTS(options.copy_piece > 0, "spill_options: copy_piece is 0");
  scoped_device on_device(device_);
  to_host_stream_ = backend_->create_stream(true);
  try {
    to_device_stream_ = backend_->create_stream(true);
    pinned_ = std::make_unique<pinned_host_resource>(host_alloc_flags{true, true, false});
    pool_options pool;
    pool.chunk_size = std::max<std::size_t>(options.host_pool_growth, 2u << 20);
    pool.initial_size = 0;
    host_pool_ = std::make_unique<pool_resource>(*pinned_, pool);
  } catch (...) {
    if (to_device_stream_ != nullptr) backend_->destroy_stream(to_device_stream_);
    backend_->destroy_stream(to_host_stream_);
    throw;
  }
  stats_.level = options.statistics_level;
}

spill_registry::~spill_registry() {
  try {
    scoped_device on_device(device_);
    backend_->synchronize_stream(to_host_stream_);
    backend_->synchronize_stream(to_device_stream_);
    host_pool_.reset();
    pinned_.reset();
    backend_->destroy_stream(to_host_stream_);
    backend_->destroy_stream(to_device_stream_);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("spill manager: releasing its streams failed: ") + e.what());
  }
}

void spill_registry::add(std::shared_ptr<buffer_storage> const& storage) {
  storage->touch();
  std::lock_guard<std::mutex> lock(mutex_);
  storages_.emplace(storage.get(), storage);
  device_bytes_.fetch_add(storage->size());
}

void spill_registry::remove(buffer_storage const* storage, residence where,
                            std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  storages_.erase(storage);
  if (where == residence::spilled) {
    host_bytes_.fetch_sub(bytes);
  } else {
    device_bytes_.fetch_sub(bytes);
  }
}

std::size_t spill_registry::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return storages_.size();
}

memory_pointer spill_registry::allocate_device(std::size_t bytes) {
  // The device's context now: a manager bound after close() serves it (and asks this registry's
  // on-demand handler, which is registered for the device).
  return get_context(device_).memory_manager().memalloc(bytes);
}

host_block spill_registry::allocate_host(std::size_t bytes) {
  scoped_device on_device(device_);
  void* const ptr = host_pool_->allocate(bytes, to_host_stream_);
  return host_block(shared_from_this(), ptr, bytes);
}

void spill_registry::release_host(void* ptr, std::size_t bytes) noexcept {
  // Every copy from or to the block has been waited for: freeing on the to-host stream lets the
  // next spill reuse it at once.
  host_pool_->deallocate(ptr, bytes, to_host_stream_);
}

void spill_registry::enqueue_copy(void* dst, void const* src, std::size_t bytes,
                                  copy_direction direction) {
  stream_handle const s =
      direction == copy_direction::to_host ? to_host_stream_ : to_device_stream_;
  auto* d = static_cast<unsigned char*>(dst);
  auto const* from = static_cast<unsigned char const*>(src);
  for (std::size_t done = 0; done < bytes;) {
    std::size_t const n = std::min(options_.copy_piece, bytes - done);
    backend_->copy_async(d + done, from + done, n, s);
    done += n;
  }
}

void spill_registry::wait(copy_direction direction) {
  backend_->synchronize_stream(direction == copy_direction::to_host ? to_host_stream_
                                                                    : to_device_stream_);
}

void spill_registry::copy(void* dst, void const* src, std::size_t bytes, copy_direction direction) {
  scoped_device on_device(device_);
  enqueue_copy(dst, src, bytes, direction);
  wait(direction);
}

template <class It, class Storage>
void spill_registry::synchronize_if_lent(It first, It last, Storage storage_of) {
  // A victim whose pointer was lent inside a spill lock may still be read or written by work on
  // any stream (spill_lock.hpp: work is finished, or ordered by this synchronisation, before the
  // lock goes). Victims only pinned by transfers or holds have no such work, and a device-wide
  // synchronisation would also wait for the other direction's copies: it is skipped for them.
  bool lent = false;
  for (It it = first; it != last; ++it)
    lent = lent || storage_of(*it).lent();
  if (!lent) return;
  backend_->synchronize();
  for (It it = first; it != last; ++it)
    storage_of(*it).clear_lent();
}

template <class Enough>
std::size_t spill_registry::spill_victims(Enough enough) {
  // (last use, storage): the tick is read once, so the order stays consistent while other threads
  // touch the storages.
  std::vector<std::pair<std::uint64_t, std::shared_ptr<buffer_storage>>> candidates;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    candidates.reserve(storages_.size());
    for (auto const& entry : storages_)
      if (auto s = entry.second.lock()) candidates.emplace_back(s->last_use(), std::move(s));
  }
  std::sort(candidates.begin(), candidates.end(),
            [](auto const& a, auto const& b) { return a.first < b.first; });

  struct victim {
    std::shared_ptr<buffer_storage> storage;
    std::unique_lock<std::recursive_mutex> lock;
    host_block host;
  };
  std::vector<victim> victims;
  std::size_t chosen = 0;
  for (auto& candidate : candidates) {
    auto& s = candidate.second;
    if (enough(chosen)) break;
    std::unique_lock<std::recursive_mutex> lock(s->mutex(), std::try_to_lock);
    if (!lock.owns_lock() || !s->spillable_now()) continue;
    chosen += s->size();
    victims.push_back(victim{std::move(s), std::move(lock), host_block()});
  }
  if (victims.empty()) return 0;

  auto const start = std::chrono::steady_clock::now();
  std::size_t spilled = 0;
  {
    scoped_device on_device(device_);
    synchronize_if_lent(victims.begin(), victims.end(),
                        [](victim const& v) -> buffer_storage& { return *v.storage; });
    std::size_t enqueued = 0;
    for (auto& v : victims) {
      try {
        v.host = allocate_host(v.storage->size());
      } catch (out_of_memory const&) {
        break;  // no host memory for more: spill those that have a block
      }
      enqueue_copy(v.host.get(), v.storage->current_address(), v.storage->size(),
                   copy_direction::to_host);
      ++enqueued;
    }
    if (enqueued != 0) wait(copy_direction::to_host);
    for (auto& v : victims) {
      if (v.host.get() == nullptr) continue;
      std::size_t const bytes = v.storage->size();
      v.storage->finish_spill(std::move(v.host));
      device_bytes_.fetch_sub(bytes);
      host_bytes_.fetch_add(bytes);
      spilled += bytes;
    }
  }
  std::chrono::duration<double> const took = std::chrono::steady_clock::now() - start;
  if (options_.statistics_level >= 1 && spilled != 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.spilled_bytes += spilled;
    stats_.spill_seconds += took.count();
    ++stats_.spill_count;
  }
  return spilled;
}

std::size_t spill_registry::spill_bytes(std::size_t nbytes) {
  if (nbytes == 0) return 0;
  return spill_victims([nbytes](std::size_t chosen) { return chosen >= nbytes; });
}

std::size_t spill_registry::spill_to(std::size_t limit) {
  return spill_victims([this, limit](std::size_t chosen) {
    std::size_t const on_device = device_bytes_.load();
    return on_device <= chosen || on_device - chosen <= limit;
  });
}

bool spill_registry::spill_storage(buffer_storage& storage) {
  if (storage.registry() != this) return false;
  auto const start = std::chrono::steady_clock::now();
  std::lock_guard<std::recursive_mutex> lock(storage.mutex());
  if (!storage.spillable_now()) return false;
  {
    scoped_device on_device(device_);
    buffer_storage* const one[] = {&storage};
    synchronize_if_lent(std::begin(one), std::end(one),
                        [](buffer_storage* s) -> buffer_storage& { return *s; });
    host_block host = allocate_host(storage.size());
    enqueue_copy(host.get(), storage.current_address(), storage.size(), copy_direction::to_host);
    wait(copy_direction::to_host);
    storage.finish_spill(std::move(host));
  }
  device_bytes_.fetch_sub(storage.size());
  host_bytes_.fetch_add(storage.size());
  std::chrono::duration<double> const took = std::chrono::steady_clock::now() - start;
  if (options_.statistics_level >= 1) {
    std::lock_guard<std::mutex> stats_lock(mutex_);
    stats_.spilled_bytes += storage.size();
    stats_.spill_seconds += took.count();
    ++stats_.spill_count;
  }
  return true;
}

void spill_registry::enforce_limit() noexcept {
  if (!options_.device_limit) return;
  if (device_bytes_.load() <= *options_.device_limit) return;
  try {
    spill_to(*options_.device_limit);
  } catch (std::exception const& e) {
    // A soft limit: failing to meet it is not an error of the operation that triggered it.
    log(log_level::warn,
        std::string("spill manager: spilling to the device limit failed: ") + e.what());
  }
}

void spill_registry::on_unspilled(std::size_t bytes, double seconds) noexcept {
  device_bytes_.fetch_add(bytes);
  host_bytes_.fetch_sub(bytes);
  if (options_.statistics_level < 1) return;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.unspilled_bytes += bytes;
  stats_.unspill_seconds += seconds;
  ++stats_.unspill_count;
}

void spill_registry::on_exposed(std::size_t bytes, char const* file, int line) noexcept {
  if (options_.statistics_level < 2) return;
  try {
    std::string where =
        file != nullptr ? std::string(file) + ":" + std::to_string(line) : std::string("(unknown)");
    std::lock_guard<std::mutex> lock(mutex_);
    auto& e = exposures_[where];
    e.where = where;
    ++e.count;
    e.bytes += bytes;
  } catch (...) {
    // Statistics never fail the access they describe.
  }
}

spill_statistics spill_registry::statistics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  spill_statistics out = stats_;
  for (auto const& entry : exposures_)
    out.exposures.push_back(entry.second);
  std::stable_sort(out.exposures.begin(), out.exposures.end(),
                   [](auto const& a, auto const& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace gpumem::detail
