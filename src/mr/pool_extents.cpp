// pool_extent_set: merging, splitting and the best fit over one owner's extents (see
// pool_extents.hpp). Merging and splitting reuse the nodes of the extents they change, so only an
// extent with no neighbour to join allocates.
#include "pool_extents.hpp"

#include <algorithm>
#include <iterator>

namespace gpumem::detail {

pool_extent_set::insert_result pool_extent_set::insert(std::uintptr_t addr, std::size_t size,
                                                       std::uint64_t epoch, pool_chunk* chunk) {
  if (chunk == nullptr || addr < chunk->base || addr + size > chunk->base + chunk->size)
    return insert_result::outside_chunk;
  auto next = by_addr_.lower_bound(addr);
  auto prev = next == by_addr_.begin() ? by_addr_.end() : std::prev(next);
  if ((next != by_addr_.end() && next->first < addr + size) ||
      (prev != by_addr_.end() && prev->first + prev->second.size > addr))
    return insert_result::overlaps;
  bool const join_prev = prev != by_addr_.end() && prev->first + prev->second.size == addr &&
                         prev->second.chunk == chunk;
  bool const join_next =
      next != by_addr_.end() && next->first == addr + size && next->second.chunk == chunk;
  if (!join_prev && !join_next) {
    auto const key = by_size_.emplace(size, addr).first;
    try {
      by_addr_.emplace_hint(next, addr, pool_extent{size, epoch, chunk});
    } catch (...) {
      by_size_.erase(key);
      throw;
    }
    add_bytes(size);
    return insert_result::inserted;
  }
  std::uintptr_t const start = join_prev ? prev->first : addr;
  std::size_t total = size;
  if (join_prev) {
    total += prev->second.size;
    epoch = std::max(epoch, prev->second.epoch);
  }
  if (join_next) {
    total += next->second.size;
    epoch = std::max(epoch, next->second.epoch);
  }
  // The merged extent keeps the nodes of the one it grows from.
  auto const keep = join_prev ? prev : next;
  auto key = by_size_.extract({keep->second.size, keep->first});
  if (join_prev && join_next) {
    by_size_.erase({next->second.size, next->first});
    by_addr_.erase(next);
  }
  if (join_prev) {
    keep->second.size = total;
    keep->second.epoch = epoch;
  } else {
    auto const hint = std::next(keep);
    auto node = by_addr_.extract(keep);
    node.key() = start;
    node.mapped().size = total;
    node.mapped().epoch = epoch;
    by_addr_.insert(hint, std::move(node));
  }
  key.value() = {total, start};
  by_size_.insert(std::move(key));
  add_bytes(size);
  return insert_result::inserted;
}

pool_extent_set::map::iterator pool_extent_set::erase(map::iterator it) noexcept {
  by_size_.erase({it->second.size, it->first});
  remove_bytes(it->second.size);
  return by_addr_.erase(it);
}

pool_extent_set::map::iterator pool_extent_set::best_fit(std::size_t size) {
  auto const key = by_size_.lower_bound({size, 0});
  return key == by_size_.end() ? by_addr_.end() : by_addr_.find(key->second);
}

pool_extent_set::map::iterator pool_extent_set::best_fit_batch(std::size_t size,
                                                               std::uint32_t count) {
  auto it = best_fit(count * size);
  return it == by_addr_.end() && count > 1 ? best_fit(size) : it;
}

std::uintptr_t pool_extent_set::take(map::iterator it, std::size_t size) noexcept {
  std::uintptr_t const addr = it->first;
  if (it->second.size <= size) {
    erase(it);
    return addr;
  }
  // The rest keeps the extent's nodes; its neighbours were not mergeable before, nor now.
  auto key = by_size_.extract({it->second.size, addr});
  auto const hint = std::next(it);
  auto node = by_addr_.extract(it);
  node.key() = addr + size;
  node.mapped().size -= size;
  key.value() = {node.mapped().size, addr + size};
  by_addr_.insert(hint, std::move(node));
  by_size_.insert(std::move(key));
  remove_bytes(size);
  return addr;
}

void pool_extent_set::cut_back(map::iterator it, std::size_t size) noexcept {
  if (it->second.size <= size) {
    erase(it);
    return;
  }
  auto key = by_size_.extract({it->second.size, it->first});
  it->second.size -= size;
  key.value().first = it->second.size;
  by_size_.insert(std::move(key));
  remove_bytes(size);
}

}  // namespace gpumem::detail
