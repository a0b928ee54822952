// pool_resource's waits for the device (see pool_state.hpp): the only way the pool reaches memory
// that streams it may not ask about (pool_state::touchable) freed since their last completed
// fences. Each cuts the streams' epochs and pins them, synchronises the device with the pool's
// mutex released (device work may wait for a thread that needs it), then completes the cuts:
// in the caller for trim() and the out-of-memory path (complete_all_after_synchronizing), on a
// thread of the pool's own for orphaned streams (start_orphan_sync_locked). Every function named
// *_locked runs with the pool's mutex held.
#include "pool_state.hpp"

#include <gpumem/core/logging.hpp>

#include <exception>
#include <string>
#include <utility>

namespace gpumem::detail {

std::vector<pool_state::stream_cut> pool_state::cut_streams_locked(
    bool (*which)(pool_stream const&)) {
  std::vector<stream_cut> cuts;
  cuts.reserve(streams_.size());
  for (auto& entry : streams_) {
    pool_stream& o = *entry.second;
    if (!which(o)) continue;
    try {
      drain_class_lists_locked(o);  // without memory for a node, the rest stays listed
    } catch (...) {
    }
    cuts.push_back({&o, cut_epoch_locked(o)});
    ++o.pins;  // not reaped before complete_cuts_locked
  }
  return cuts;
}

void pool_state::complete_cuts_locked(std::vector<stream_cut> const& cuts,
                                      bool synchronized) noexcept {
  for (auto const& c : cuts) {
    try {
      if (synchronized) complete_all_fences_locked(*c.stream, c.upto);
    } catch (...) {  // what could not be freed stays the stream's, for a later synchronisation
    }
    --c.stream->pins;
  }
  if (synchronized) ++counts_.synchronizations;
}

bool pool_state::synchronize_device() noexcept {
  try {  // on the orphan synchronisation's thread: nobody to throw to
    scoped_device const on_device(backend_, device_);
    backend_.synchronize();
    return true;
  } catch (std::exception const& e) {
    try {
      log(log_level::warn, name() + ": synchronising the device failed: " + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  return false;
}

void pool_state::complete_all_after_synchronizing(std::unique_lock<std::mutex>& lock) {
  std::vector<stream_cut> const cuts = cut_streams_locked([](pool_stream const&) { return true; });
  lock.unlock();
  try {
    scoped_device const on_device(backend_, device_);
    backend_.synchronize();
  } catch (...) {  // the caller's error (trim, out-of-memory): nothing completed
    lock.lock();
    complete_cuts_locked(cuts, false);
    throw;
  }
  lock.lock();
  complete_cuts_locked(cuts, true);
}

bool pool_state::orphaned(pool_stream const& s) noexcept {
  return s.key.which == pool_stream_key::kind::created && s.caches == 0 &&
         !s.released.load(std::memory_order_relaxed);
}

void pool_state::start_orphan_sync_locked() noexcept {
  if (orphan_sync_running_ || is_closed()) return;
  std::vector<stream_cut> cuts;
  try {
    cuts =
        cut_streams_locked([](pool_stream const& o) { return orphaned(o) && parked_bytes(o) > 0; });
  } catch (...) {  // no memory for the list: the next miss tries again
    return;
  }
  if (cuts.empty()) return;
  try {
    // The previous one is done (orphan_sync_running_ is false): only its exit is left to wait for.
    if (orphan_sync_.joinable()) orphan_sync_.join();
    orphan_sync_ = std::thread([this, cuts] {
      bool const synchronized = synchronize_device();
      std::lock_guard<std::mutex> lock(mutex_);
      complete_cuts_locked(cuts, synchronized);
      reap_retired_locked();
      orphan_sync_running_ = false;
      growth_done_.notify_all();  // a miss may be waiting for it (obtain)
    });
    orphan_sync_running_ = true;
    orphan_sync_since_ = std::chrono::steady_clock::now();
  } catch (...) {  // no thread: the next miss tries again
    complete_cuts_locked(cuts, false);
  }
}

void pool_state::join_orphan_sync() noexcept {
  std::thread done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done = std::move(orphan_sync_);
  }
  if (done.joinable()) done.join();
}

}  // namespace gpumem::detail
