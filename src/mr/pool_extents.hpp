// The coalescing best fit of pool_resource (private to src/mr/pool_*.cpp): the extents of one
// owner, by address (to merge neighbours) and by size (the best fit). The pool has one set for the
// extents free for every stream (under its mutex) and one per stream (under that stream's lock),
// so that a stream carves from its own extents without the pool's mutex.
//
// By address: an ordered map keyed by each extent's END (merging needs the neighbours of a range),
// so that the common changes move no node: carving a block from the start of an extent, and
// handing back a block that joins the extent after it, change only the extent's start and size.
// (Sorted arrays of keys under an array of their leaves' tops, searched without branches, in place
// of the tree: half the mispredicted branches under cachegrind, yet no faster on the H200 machine's
// host: a pair of the mixed trace's large blocks, 256 KiB-4 MiB, took 315 ns against 286.)
// By size: segregated bins
// (16 per power of two, so sizes in a bin differ by at most 1/16), each an intrusive list of the
// bin's extents, with a two-level bitmap of the bins in use: finding the bin of a fit is a few bit
// scans, and adding or removing an extent is O(1) with no allocation (an ordered index of sizes
// cost a tree insert and erase, each a rebalance, for every block carved or handed back). The fit
// is the smallest extent of at least the request (the lowest address among equals): the bin of the
// request is searched for the smallest that fits, else the next bin in use for its smallest; a bin
// is searched only up to pool_extent_set::scan_limit entries, past which the smallest found so far
// is taken (within 1/16 of the best). Nodes of erased extents are kept for the next insert (a few),
// so handing back a block that joins no neighbour rarely allocates.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::detail {

// A chunk of the pool's memory: taken from the upstream, or the mapped part of an expandable
// pool's range. base and size change only with the pool's mutex and its chunk lock both held.
struct pool_chunk {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  bool mapped = false;  // the virtual range of an expandable pool, not an upstream chunk
  // Under the pool's mutex: the trims before a growth that found the chunk wholly unused.
  std::uint32_t unused_sightings = 0;
};

struct pool_extent;
// An element of a set's address map; its bin links point at elements of the same map.
using pool_extent_entry = std::pair<std::uintptr_t const, pool_extent>;

struct pool_extent {
  std::uintptr_t start = 0;  // the map's key is start + size
  std::size_t size = 0;
  std::uint64_t epoch = 0;  // of its owner's fences (0 for free extents)
  pool_chunk* chunk = nullptr;
  // The set's size bins (intrusive, maintained by pool_extent_set alone): the bin it is listed in.
  pool_extent_entry* bin_prev = nullptr;
  pool_extent_entry* bin_next = nullptr;
  unsigned bin = 0;
};

// Not thread safe: its owner's lock guards it. bytes() may be read without that lock, as a hint.
// Sizes are multiples of 256 bytes (pool_granularity). The map (end -> extent, in address order)
// is exposed for ordered walks; extents are changed only through the set's members (a start or
// size changed behind its back would leave the extent under the wrong key or in the wrong bin).
class pool_extent_set {
 public:
  using map = std::map<std::uintptr_t, pool_extent>;
  enum class insert_result { inserted, outside_chunk, overlaps };
  // Entries of one bin examined at most by a fit before it settles for the smallest seen.
  static constexpr std::size_t scan_limit = 32;

  pool_extent_set() = default;
  pool_extent_set(pool_extent_set const&) = delete;
  pool_extent_set& operator=(pool_extent_set const&) = delete;

  // Adds [addr, addr + size) of `chunk`, merged with adjacent extents of the same chunk (the merged
  // extent takes the later epoch). Refuses a range outside the chunk or overlapping an extent of
  // this set (a double free or a wrong size). May throw std::bad_alloc (then nothing changed).
  insert_result insert(std::uintptr_t addr, std::size_t size, std::uint64_t epoch,
                       pool_chunk* chunk);
  map::iterator erase(map::iterator it) noexcept;
  // The smallest extent of at least `size` bytes (null if none; see the file comment). An entry,
  // not an iterator: the size bins link entries, and the fit needs no lookup in the map.
  pool_extent_entry* best_fit(std::size_t size) noexcept;
  // For a batch: the best fit for `count` blocks of `size` bytes, else for one (null if none).
  pool_extent_entry* best_fit_batch(std::size_t size, std::uint32_t count) noexcept;
  // Takes `size` bytes (at most the extent's) from the start of extent `e`; the rest stays, with
  // its epoch and node. Returns their address. Never allocates.
  std::uintptr_t take(pool_extent_entry& e, std::size_t size) noexcept;
  // Removes `size` bytes (at most the extent's) from the end of `it`. Never allocates.
  void cut_back(map::iterator it, std::size_t size) noexcept;
  // Makes sure that the next insert or cut_out needs no allocation (a node is kept ready). May
  // throw std::bad_alloc (then nothing changed): a caller that must not fail to hand a range back
  // calls it first, while it can still keep the range.
  void reserve_node();
  // Removes [addr, addr + size), which lies inside `it`, and keeps what is left on either side.
  // Allocates a node only when both sides are left; may throw std::bad_alloc (then nothing
  // changed).
  void cut_out(map::iterator it, std::uintptr_t addr, std::size_t size);
  // The extent starting at / ending at an address (end() if none).
  map::iterator find_start(std::uintptr_t addr) noexcept;
  map::iterator find_end(std::uintptr_t end) noexcept { return by_end_.find(end); }
  // True if [addr, addr + size) overlaps an extent of the set.
  bool overlaps(std::uintptr_t addr, std::size_t size) const noexcept;

  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  std::size_t largest() const noexcept;
  std::size_t count() const noexcept { return by_end_.size(); }
  bool empty() const noexcept { return by_end_.empty(); }
  map& extents() noexcept { return by_end_; }
  map const& extents() const noexcept { return by_end_; }
  // Full check of the index (check_invariants): every key the end of its extent, every extent in
  // the bin of its size exactly once, the bitmaps naming exactly the bins in use. Empty if sound,
  // else the first problem.
  std::string validate_index() const;

  // The bin of a size (public for tests): 16 bins per power of two of 256-byte units.
  static unsigned bin_of(std::size_t size) noexcept {
    std::uint64_t const units = static_cast<std::uint64_t>(size) >> 8;  // pool_granularity
    if (units < 16) return static_cast<unsigned>(units);
    auto const log = 63u - static_cast<unsigned>(__builtin_clzll(units));  // 4 and up
    return (log - 3) * 16 + static_cast<unsigned>((units >> (log - 4)) & 15);
  }

 private:
  static constexpr unsigned bins = 64 * 14;  // covers every 64-bit size
  static constexpr unsigned bin_words = bins / 64;

  void link(pool_extent_entry& e) noexcept;
  void unlink(pool_extent_entry& e) noexcept;
  // After a change of e's size: moves it to the bin of its new size if that is another bin.
  void rebin(pool_extent_entry& e) noexcept;
  // The first bin at or after `bin` that holds an extent (bins if none).
  unsigned next_bin(unsigned bin) const noexcept;
  // A map node for extent `e`: a kept one if any. May throw std::bad_alloc.
  map::iterator emplace(map::iterator hint, pool_extent const& e);
  // Gives `it` a new key (its end moved); the order of the extents is unchanged.
  map::iterator rekey(map::iterator it, std::uintptr_t end) noexcept;
  // Removes `it`'s node from the map, keeping it for the next insert when there is room.
  void drop_node(map::iterator it) noexcept;
  void add_bytes(std::size_t size) noexcept {
    bytes_.store(bytes() + size, std::memory_order_relaxed);
  }
  void remove_bytes(std::size_t size) noexcept {
    bytes_.store(bytes() - size, std::memory_order_relaxed);
  }

  map by_end_;
  std::array<pool_extent_entry*, bins> heads_{};
  std::array<std::uint64_t, bin_words> used_{};  // bit b % 64 of word b / 64: bin b in use
  std::uint64_t used_words_ = 0;                 // bit w: used_[w] != 0
  // Nodes of erased extents, for the next inserts (at most spare_limit).
  static constexpr std::size_t spare_limit = 8;
  std::vector<map::node_type> spare_;
  std::atomic<std::size_t> bytes_{0};
};

}  // namespace gpumem::detail
