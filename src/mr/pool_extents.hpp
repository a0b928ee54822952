// The coalescing best fit of pool_resource (private to src/mr/pool_*.cpp): the extents of one
// owner, by address (to merge neighbours) and by size (O(log n) best fit). The pool has one set
// for the extents free for every stream (under its mutex) and one per stream (under that stream's
// lock), so that a stream carves from its own extents without the pool's mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace gpumem::detail {

// A chunk of the pool's memory: taken from the upstream, or the mapped part of an expandable
// pool's range. base and size change only with the pool's mutex and its chunk lock both held.
struct pool_chunk {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  bool mapped = false;  // the virtual range of an expandable pool, not an upstream chunk
};

struct pool_extent {
  std::size_t size = 0;
  std::uint64_t epoch = 0;  // of its owner's fences (0 for free extents)
  pool_chunk* chunk = nullptr;
};

// Not thread safe: its owner's lock guards it. bytes() may be read without that lock, as a hint.
class pool_extent_set {
 public:
  using map = std::map<std::uintptr_t, pool_extent>;
  using size_index = std::set<std::pair<std::size_t, std::uintptr_t>>;
  enum class insert_result { inserted, outside_chunk, overlaps };

  // Adds [addr, addr + size) of `chunk`, merged with adjacent extents of the same chunk (the merged
  // extent takes the later epoch). Refuses a range outside the chunk or overlapping an extent of
  // this set (a double free or a wrong size). May throw std::bad_alloc (then nothing changed).
  insert_result insert(std::uintptr_t addr, std::size_t size, std::uint64_t epoch,
                       pool_chunk* chunk);
  map::iterator erase(map::iterator it) noexcept;
  // The smallest extent of at least `size` bytes (end() if none).
  map::iterator best_fit(std::size_t size);
  // For a batch: the best fit for `count` blocks of `size` bytes, else for one (end() if none).
  map::iterator best_fit_batch(std::size_t size, std::uint32_t count);
  // Takes `size` bytes (at most the extent's) from the start of `it`; the rest stays, with its
  // epoch. Returns their address. Never allocates.
  std::uintptr_t take(map::iterator it, std::size_t size) noexcept;
  // Removes `size` bytes (at most the extent's) from the end of `it`. Never allocates.
  void cut_back(map::iterator it, std::size_t size) noexcept;

  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  std::size_t largest() const noexcept { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }
  bool empty() const noexcept { return by_addr_.empty(); }
  map& extents() noexcept { return by_addr_; }
  map const& extents() const noexcept { return by_addr_; }
  size_index const& index() const noexcept { return by_size_; }

 private:
  void add_bytes(std::size_t size) noexcept {
    bytes_.store(bytes() + size, std::memory_order_relaxed);
  }
  void remove_bytes(std::size_t size) noexcept {
    bytes_.store(bytes() - size, std::memory_order_relaxed);
  }

  map by_addr_;
  size_index by_size_;
  std::atomic<std::size_t> bytes_{0};
};

}  // namespace gpumem::detail
