// The bytes of a spilled storage in the spill manager's pinned host pool: a list of blocks of at
// most the manager's copy piece each (the last one shorter), not one block of the buffer's size.
// Pieces fit the pool's chunks whatever the buffers' sizes, so a workload whose buffers differ in
// size reuses the pinned memory it has instead of growing the pool (and pinning) for each new
// size; and every copy piece has a block of its own.
//
// Ownership: the blocks go back to the pool when the copy is reset or destroyed (every copy from
// or to them has been waited for by then); the copy keeps the registry, and so the pool, alive.
// Thread safety: none of its own (a storage's copy is used under the storage's mutex).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace gpumem::detail {

class spill_registry;

class host_copy {
 public:
  host_copy() noexcept = default;
  host_copy(host_copy&& other) noexcept { *this = std::move(other); }
  host_copy& operator=(host_copy&& other) noexcept {
    if (this != &other) {
      reset();
      registry_ = std::move(other.registry_);
      blocks_ = std::move(other.blocks_);
      bytes_ = std::exchange(other.bytes_, 0);
      piece_ = std::exchange(other.piece_, 0);
      other.blocks_.clear();
    }
    return *this;
  }
  host_copy(host_copy const&) = delete;
  host_copy& operator=(host_copy const&) = delete;
  ~host_copy() { reset(); }

  // Gives the blocks back to the pool.
  void reset() noexcept;
  bool empty() const noexcept { return blocks_.empty(); }
  std::size_t bytes() const noexcept { return bytes_; }
  // Block i holds bytes [i * piece, min((i + 1) * piece, bytes)).
  std::size_t piece() const noexcept { return piece_; }
  std::vector<void*> const& blocks() const noexcept { return blocks_; }
  std::size_t block_bytes(std::size_t i) const noexcept {
    std::size_t const first = i * piece_;
    return bytes_ - first < piece_ ? bytes_ - first : piece_;
  }

 private:
  friend class spill_registry;
  std::shared_ptr<spill_registry> registry_;
  std::vector<void*> blocks_;
  std::size_t bytes_ = 0;
  std::size_t piece_ = 0;
};

}  // namespace gpumem::detail
