// gpumem/manager/memory_statistics.hpp
//
// One snapshot of what a memory manager has done with its device's memory: what callers hold,
// what the manager took from the device, how often it ran out, and what waits in the context's
// deferred-deallocation queue. memory_manager::get_memory_statistics() returns it; the Python
// package shows it as gpumem.statistics(device).
//
//   memory_statistics s = get_context(0).memory_manager().get_memory_statistics();
//   std::printf("%zu bytes in use, %zu held\n", s.bytes_in_use, s.held_bytes);
//
// A plain value (no ownership). Counters are read one by one without a common lock, so a snapshot
// taken while other threads allocate is consistent per field, not across fields.
#pragma once

#include <cstddef>

namespace gpumem {

struct memory_statistics {
  std::size_t bytes_in_use = 0;  // handed out and not yet freed (frees still queued count as used)
  std::size_t peak_bytes = 0;    // the highest bytes_in_use since the manager was made
  // Taken from the device: a pool's chunks; equal to bytes_in_use for managers that keep no cache
  // (default, host_only) and for those that cannot tell (async: the driver's pool is not visible).
  std::size_t held_bytes = 0;
  std::size_t allocations = 0;            // live allocations (made and not yet freed)
  std::size_t total_allocations = 0;      // every allocation that returned memory
  std::size_t out_of_memory_retries = 0;  // allocations that succeeded only after flush and retry
  std::size_t pending_count = 0;          // the context's deferred-deallocation queue, now
  std::size_t pending_bytes = 0;
  // Frees out of that queue that wait for the device synchronisation releasing them (the queue's
  // retired list: pending_deallocations.hpp); still counted in bytes_in_use.
  std::size_t retired_count = 0;
  std::size_t retired_bytes = 0;
};

}  // namespace gpumem
