// pool_resource's expandable growth: one reserved virtual range, backed from its start by physical
// pieces (device_backend's virtual-memory calls), so that the pool's memory is one chunk that grows
// at its end. A block larger than any free extent then needs only the difference mapped after the
// free end, never a whole new chunk beside the others (what splits large blocks across chunks and
// makes a chunked pool hold more than it uses). See pool_state.hpp for the locking.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>

namespace gpumem::detail {

pool_vrange::pool_vrange(device_backend& backend, std::size_t capacity)
    : backend_(backend), granularity_(backend.vmm_granularity()), capacity_(0), base_(nullptr) {
  if (granularity_ == 0)
    throw not_supported("pool_resource: the " + std::string(to_string(backend.kind())) +
                        " backend has no virtual memory management (pool_options::expandable)");
  capacity_ = pool_round_up_to(std::max<std::size_t>(capacity, 1), granularity_);
  base_ = backend_.reserve_address_range(capacity_);
}

pool_vrange::~pool_vrange() {
  shrink(0);
  try {
    backend_.release_address_range(base_, capacity_);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("pool_resource: releasing its range failed: ") + e.what());
  }
}

void pool_vrange::extend(std::size_t bytes) {
  GPUMEM_EXPECTS(bytes > 0 && bytes % granularity_ == 0 && bytes <= room(),
                 "pool_vrange::extend(" + std::to_string(bytes) + "): room " +
                     std::to_string(room()) + ", granularity " + std::to_string(granularity_));
  physical_handle const handle = backend_.create_physical(bytes);
  try {
    pieces_.reserve(pieces_.size() + 1);
    backend_.map_physical(static_cast<char*>(base_) + mapped(), bytes, handle);
  } catch (...) {
    backend_.release_physical(handle);
    throw;
  }
  pieces_.push_back({mapped(), bytes, handle});
  mapped_.store(mapped() + bytes, std::memory_order_relaxed);
}

std::size_t pool_vrange::shrink(std::size_t keep) noexcept {
  std::size_t released = 0;
  while (!pieces_.empty() && mapped() - pieces_.back().size >= keep) {
    piece const last = pieces_.back();
    try {
      backend_.unmap(static_cast<char*>(base_) + last.offset, last.size);
      backend_.release_physical(last.handle);
    } catch (std::exception const& e) {
      // Kept mapped (and counted): the pool goes on without giving this piece back.
      log(log_level::error, std::string("pool_resource: unmapping ") + format_bytes(last.size) +
                                " of its range failed: " + e.what());
      break;
    }
    pieces_.pop_back();
    mapped_.store(mapped() - last.size, std::memory_order_relaxed);
    released += last.size;
  }
  return released;
}

// --- pool_state's side ---------------------------------------------------------------------------

pool_state::extent_map::iterator pool_state::range_tail_locked() noexcept {
  auto& free = free_.extents();
  if (vrange_chunk_ == nullptr || vrange_chunk_->size == 0) return free.end();
  auto const it = free.find(vrange_chunk_->base + vrange_chunk_->size);  // keyed by the end
  return it != free.end() && it->second.chunk == vrange_chunk_ ? it : free.end();
}

bool pool_state::grow_range(std::unique_lock<std::mutex>& lock, std::size_t size) {
  // Another growth may map its piece between the free end this one claimed and its own piece (it
  // takes vrange_mutex_ first), and other threads may carve that piece: then the request does not
  // fit yet, and the growth goes on from the new end.
  std::size_t const need = pool_round_up(size);
  bool grown = false;
  for (int round = 0; round < 8; ++round) {
    auto const tail = range_tail_locked();
    if (grown && tail != free_.extents().end() && tail->second.size >= need) return true;
    if (!grow_range_once(lock, size)) return grown;
    grown = true;
  }
  return grown;
}

bool pool_state::grow_range_once(std::unique_lock<std::mutex>& lock, std::size_t size) {
  std::size_t const need = pool_round_up(size);
  std::size_t const granularity = vrange_->granularity();
  std::size_t const chunk = pool_round_up_to(growth_step_locked(), granularity);
  std::size_t const taken = held_ + growing_;
  if (taken > options_.maximum_size) return false;
  std::size_t const limit = (options_.maximum_size - taken) / granularity * granularity;
  // What the free end already holds need not be mapped again: that is the point. It is claimed
  // (taken out of the extents) while the mutex is released for the mapping, so that no other
  // thread carves it meanwhile and the request fits once the new piece is added behind it.
  auto const tail = range_tail_locked();
  bool const has_tail = tail != free_.extents().end();
  std::size_t const tail_bytes = has_tail ? tail->second.size : 0;
  std::size_t const missing = pool_round_up_to(need - std::min(need, tail_bytes), granularity);
  std::size_t const step =
      std::min({std::max(missing, chunk), pool_round_up_to(need, granularity) + chunk,
                vrange_->room(), limit});
  if (step < missing || step == 0) return false;
  std::uintptr_t const claim_at = has_tail ? tail->second.start : 0;
  std::size_t const claim = tail_bytes;
  if (claim > 0) free_.erase(tail);
  claimed_bytes_ += claim;
  growing_ += step;
  auto give_back_claim = [&] {
    claimed_bytes_ -= claim;
    if (claim > 0) add_extent(free_, claim_at, claim, 0, vrange_chunk_);
  };
  lock.unlock();
  std::unique_lock<std::mutex> range(vrange_mutex_);
  bool mapped = false;
  try {
    // Room may have been taken by a growth that ran while this one waited for vrange_mutex_.
    if (step <= vrange_->room()) {
      vrange_->extend(step);
      mapped = true;
    }
  } catch (out_of_memory const&) {
  } catch (...) {
    lock.lock();
    growing_ -= step;
    give_back_claim();
    throw;
  }
  lock.lock();  // vrange_mutex_ first, then mutex_: the order of every growth
  growing_ -= step;
  if (!mapped) {
    give_back_claim();
    return false;
  }
  std::uintptr_t start = 0;
  {
    std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
    if (vrange_chunk_ == nullptr) {
      auto const base = vrange_->base();
      vrange_chunk_ = &chunks_.try_emplace(base).first->second;
      vrange_chunk_->base = base;
      vrange_chunk_->mapped = true;
    }
    start = vrange_chunk_->base + vrange_chunk_->size;
    vrange_chunk_->size += step;
  }
  add_extent(free_, start, step, 0, vrange_chunk_);
  give_back_claim();  // merges with the new piece: the free end now holds the request
  note_growth_locked(step);
  return true;
}

std::size_t pool_state::shrink_range_locked() noexcept {
  if (vrange_chunk_ == nullptr) return 0;
  std::unique_lock<std::mutex> range(vrange_mutex_, std::try_to_lock);
  if (!range) return 0;  // a growth is mapping: leave the range to it
  std::uintptr_t const base = vrange_chunk_->base;
  auto const it = range_tail_locked();
  if (it == free_.extents().end()) return 0;
  std::uintptr_t const start = it->second.start;
  std::size_t const released = vrange_->shrink(start - base);
  if (released == 0) return 0;
  free_.cut_back(it, released);  // released never exceeds the free end
  std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
  vrange_chunk_->size -= released;
  held_ -= released;
  held_hint_.store(held_, std::memory_order_relaxed);
  ++upstream_deallocations_;
  if (vrange_chunk_->size == 0) {
    chunks_.erase(base);
    vrange_chunk_ = nullptr;
  }
  return released;
}

}  // namespace gpumem::detail
