// Internal to the cuda backend: the bytes the backend has allocated, now and at the peak, which the
// out-of-memory report carries. CUDA's free calls take no size, so the size of each live allocation
// is remembered until it is freed.
//
// Thread safety: every member may be called from any thread. The counters are atomics; the sizes
// sit in a table sharded by pointer, so threads allocating at once rarely share a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace gpumem::detail {

class allocation_counter {
 public:
  // Records a successful allocation. Throws std::bad_alloc when the table cannot grow (the caller
  // then gives the allocation back).
  void add(void* p, std::size_t bytes) {
    {
      shard& s = shard_of(p);
      std::lock_guard<std::mutex> lock(s.mutex);
      s.sizes[p] = bytes;
    }
    std::size_t const now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  // Forgets `p` and returns its size; a pointer this counter never saw (another allocator's)
  // changes nothing and gives 0. Call it BEFORE the memory is freed: once freed, the address may be
  // handed out again at once, and its new entry must not be the one removed.
  std::size_t remove(void* p) noexcept {
    std::size_t bytes = 0;
    {
      shard& s = shard_of(p);
      std::lock_guard<std::mutex> lock(s.mutex);
      auto it = s.sizes.find(p);
      if (it == s.sizes.end()) return 0;
      bytes = it->second;
      s.sizes.erase(it);
    }
    current_.fetch_sub(bytes, std::memory_order_relaxed);
    return bytes;
  }

  std::size_t current_bytes() const noexcept { return current_.load(std::memory_order_relaxed); }
  std::size_t peak_bytes() const noexcept { return peak_.load(std::memory_order_relaxed); }

 private:
  struct shard {
    std::mutex mutex;
    std::unordered_map<void*, std::size_t> sizes;
  };
  shard& shard_of(void* p) noexcept {
    // Device allocations are at least 256-byte aligned: drop the low bits before picking a shard.
    auto const key = reinterpret_cast<std::uintptr_t>(p) >> 8;
    return shards_[(key ^ (key >> 7)) % shards_.size()];
  }

  std::array<shard, 16> shards_;
  std::atomic<std::size_t> current_{0};
  std::atomic<std::size_t> peak_{0};
};

}  // namespace gpumem::detail
