// Internal: the counters behind memory_statistics for managers that count their own allocations
// (default_memory_manager, resource_memory_manager). Shared by the manager and its pointers'
// finalizers (which may outlive it); lock-free atomics, so a snapshot is consistent per field.
#pragma once

#include <gpumem/manager/memory_statistics.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>

namespace gpumem::detail {

struct usage_counters {
  std::atomic<std::size_t> allocations{0};
  std::atomic<std::size_t> frees{0};
  std::atomic<std::size_t> bytes_in_use{0};
  std::atomic<std::size_t> peak_bytes{0};
  std::atomic<std::size_t> retries{0};

  void on_allocate(std::size_t bytes, bool retried) noexcept {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (retried) retries.fetch_add(1, std::memory_order_relaxed);
    std::size_t const now = bytes_in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_bytes.load(std::memory_order_relaxed);
    while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  // Never below 0: a free the layers below did not report as refused but that freed nothing (a
  // double free through a resource that cannot tell) must not wrap the count.
  void on_free(std::size_t bytes) noexcept {
    frees.fetch_add(1, std::memory_order_relaxed);
    std::size_t in_use = bytes_in_use.load(std::memory_order_relaxed);
    while (!bytes_in_use.compare_exchange_weak(in_use, in_use - std::min(in_use, bytes),
                                               std::memory_order_relaxed)) {
    }
  }
  // Sets every field but held_bytes and the queue's, which the caller knows.
  void fill(memory_statistics& s) const noexcept {
    s.total_allocations = allocations.load(std::memory_order_relaxed);
    std::size_t const freed = frees.load(std::memory_order_relaxed);
    s.allocations = s.total_allocations > freed ? s.total_allocations - freed : 0;
    s.bytes_in_use = bytes_in_use.load(std::memory_order_relaxed);
    s.peak_bytes = peak_bytes.load(std::memory_order_relaxed);
    s.out_of_memory_retries = retries.load(std::memory_order_relaxed);
  }
};

}  // namespace gpumem::detail
