// A thread's stacks of free blocks of one pool for one stream (private to src/mr/pool_*.cpp): the
// front end of pool_resource (pool_thread_cache.cpp). Touched only by its thread, except by the
// pool's destructor and by thread exit (both under the registry mutex).
#pragma once

#include "pool_stream.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gpumem::detail {

class pool_state;

inline constexpr std::uint32_t pool_bin_slots = 32;

// Caches a thread keeps per pool, at most: one more drops its oldest (its blocks go to that
// stream's lists). A thread that creates and destroys streams without release_stream would
// otherwise keep a cache, and the blocks in it, for every stream it ever used.
inline constexpr std::size_t pool_thread_caches_per_pool = 32;
// The blocks on top of a stack that a free is compared with (pool_bin::holds_recent).
inline constexpr std::uint32_t pool_bin_recent = 4;
struct pool_bin {
  std::uint32_t count = 0;
  std::uint32_t cap = 0;
  void* slots[pool_bin_slots];

  // True if `p` is one of the last pool_bin_recent blocks on the stack: freed again on this thread
  // (before it was handed out again), it would be handed out twice. A look at the whole stack (or
  // at every stack and list) would cost the free path as much as the free itself.
  bool holds_recent(void const* p) const noexcept {
    bool found = false;
    for (std::uint32_t i = count > pool_bin_recent ? count - pool_bin_recent : 0; i < count; ++i)
      found |= slots[i] == p;
    return found;
  }
  // Pushes the `n` consecutive blocks of `size` bytes starting at `base`, lowest address last
  // (so the next pop hands out the lowest).
  void push_run(std::uintptr_t base, std::uint32_t n, std::size_t size) noexcept {
    for (std::uint32_t i = 0; i < n; ++i)
      slots[count++] = reinterpret_cast<void*>(base + (n - 1 - i) * size);
  }
};

// Counters written only by the owning thread (relaxed load + store, no read-modify-write) and
// read by statistics() from any thread.
struct pool_cache_counters {
  std::atomic<std::int64_t> live_bytes{0};
  std::atomic<std::int64_t> requested_bytes{0};
  std::atomic<std::int64_t> cached_bytes{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> deallocations{0};
};

// One thread's free blocks of one pool for one stream. Aligned to a cache line, with the counters
// (written on every call) on a line of their own: caches of different threads are allocated next
// to each other, and sharing a line would make every call of one thread miss in the other's cache.
struct alignas(64) pool_thread_cache {
  std::atomic<pool_state*> pool{nullptr};  // null once the pool is destroyed
  pool_stream* stream = nullptr;
  std::uint64_t seen_flush = 0;
  std::unique_ptr<pool_bin[]> bins;
  unsigned num_classes = 0;
  alignas(64) pool_cache_counters counters;
};

std::mutex& pool_registry_mutex() noexcept;
// True once the calling thread's table of thread caches has been destroyed (it is exiting).
bool pool_thread_exiting() noexcept;

}  // namespace gpumem::detail
