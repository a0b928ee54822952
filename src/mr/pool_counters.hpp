// What pool_state counts under its mutex_ for pool_statistics (private to src/mr/pool_*.cpp). The
// thread caches count their own blocks without it (pool_thread_cache.hpp); a cache whose thread
// exits leaves its counts here (the retired_ ones).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumem::detail {

struct pool_counters {
  // Blocks of the large path (allocate_large, deallocate_large): bytes live, as rounded and as
  // requested, and calls.
  std::size_t large_live = 0;
  std::size_t large_requested = 0;
  std::uint64_t large_allocations = 0;
  std::uint64_t large_deallocations = 0;
  // Counters of caches whose thread has exited.
  std::int64_t retired_live = 0;
  std::int64_t retired_requested = 0;
  std::uint64_t retired_allocations = 0;
  std::uint64_t retired_deallocations = 0;
  std::uint64_t events_recorded = 0;
  std::uint64_t events_completed = 0;
  std::uint64_t device_queries = 0;  // query_event and query_stream calls
  std::uint64_t stream_waits = 0;    // take_from_other_stream_locked
  std::uint64_t idle_takes = 0;      // take_from_idle_stream_locked
  std::uint64_t reclaims = 0;        // reclaim_other_streams_locked
  std::uint64_t synchronizations = 0;
  std::uint64_t upstream_allocations = 0;
  std::uint64_t upstream_deallocations = 0;
  std::uint64_t lock_acquisitions = 0;
  std::uint64_t large_lock_wait_ns = 0;  // pool_statistics::large_lock_wait_ns
  std::uint64_t large_lock_hold_ns = 0;
};

}  // namespace gpumem::detail
