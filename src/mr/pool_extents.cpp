// pool_extent_set: merging, splitting and the best fit over one owner's extents (see
// pool_extents.hpp). Merging and splitting reuse the nodes of the extents they change, and erased
// nodes are kept for the next insert, so only an extent with no neighbour to join (and no kept
// node) allocates. The map is keyed by the extents' ends: carving from an extent's start and
// joining a range to the extent after it move no node. An extent whose size changes moves to
// another size bin only when its size left its bin (rebin).
#include "pool_extents.hpp"

#include <algorithm>
#include <iterator>

namespace gpumem::detail {

namespace {

inline unsigned lowest_bit(std::uint64_t v) noexcept {
  return static_cast<unsigned>(__builtin_ctzll(v));
}

inline unsigned highest_bit(std::uint64_t v) noexcept {
  return 63u - static_cast<unsigned>(__builtin_clzll(v));
}

}  // namespace

void pool_extent_set::link(pool_extent_entry& e) noexcept {
  unsigned const bin = bin_of(e.second.size);
  pool_extent_entry* const head = heads_[bin];
  e.second.bin = bin;
  e.second.bin_prev = nullptr;
  e.second.bin_next = head;
  if (head != nullptr) head->second.bin_prev = &e;
  heads_[bin] = &e;
  used_[bin / 64] |= std::uint64_t{1} << (bin % 64);
  used_words_ |= std::uint64_t{1} << (bin / 64);
}

void pool_extent_set::unlink(pool_extent_entry& e) noexcept {
  unsigned const bin = e.second.bin;
  pool_extent_entry* const prev = e.second.bin_prev;
  pool_extent_entry* const next = e.second.bin_next;
  if (next != nullptr) next->second.bin_prev = prev;
  if (prev != nullptr)
    prev->second.bin_next = next;
  else
    heads_[bin] = next;
  e.second.bin_prev = e.second.bin_next = nullptr;
  if (heads_[bin] == nullptr) {
    used_[bin / 64] &= ~(std::uint64_t{1} << (bin % 64));
    if (used_[bin / 64] == 0) used_words_ &= ~(std::uint64_t{1} << (bin / 64));
  }
}

void pool_extent_set::rebin(pool_extent_entry& e) noexcept {
  if (bin_of(e.second.size) == e.second.bin) return;
  unlink(e);
  link(e);
}

unsigned pool_extent_set::next_bin(unsigned bin) const noexcept {
  if (bin >= bins) return bins;
  unsigned const word = bin / 64;
  std::uint64_t const here = used_[word] & (~std::uint64_t{0} << (bin % 64));
  if (here != 0) return word * 64 + lowest_bit(here);
  std::uint64_t const later = word + 1 < 64 ? used_words_ & (~std::uint64_t{0} << (word + 1)) : 0;
  if (later == 0) return bins;
  unsigned const w = lowest_bit(later);
  return w * 64 + lowest_bit(used_[w]);
}

pool_extent_set::map::iterator pool_extent_set::emplace(map::iterator hint, pool_extent const& e) {
  std::uintptr_t const end = e.start + e.size;
  if (spare_.empty()) return by_end_.emplace_hint(hint, end, e);
  map::node_type node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = end;
  node.mapped() = e;
  return by_end_.insert(hint, std::move(node));
}

pool_extent_set::map::iterator pool_extent_set::rekey(map::iterator it,
                                                      std::uintptr_t end) noexcept {
  auto const hint = std::next(it);
  auto node = by_end_.extract(it);
  node.key() = end;
  return by_end_.insert(hint, std::move(node));
}

void pool_extent_set::drop_node(map::iterator it) noexcept {
  // The vector's room was reserved by an earlier insert: the push cannot allocate.
  if (spare_.size() < spare_.capacity())
    spare_.push_back(by_end_.extract(it));
  else
    by_end_.erase(it);
}

void pool_extent_set::reserve_node() {
  if (!spare_.empty()) return;
  if (spare_.capacity() < spare_limit) spare_.reserve(spare_limit);
  // A node made by an insert at key 0 (no extent ends at address 0) and taken out at once.
  spare_.push_back(by_end_.extract(by_end_.emplace_hint(by_end_.begin(), 0, pool_extent{})));
}

pool_extent_set::insert_result pool_extent_set::insert(std::uintptr_t addr, std::size_t size,
                                                       std::uint64_t epoch, pool_chunk* chunk) {
  if (chunk == nullptr || addr < chunk->base || addr + size > chunk->base + chunk->size)
    return insert_result::outside_chunk;
  std::uintptr_t const end = addr + size;
  // The first extent ending after `addr`: the only one that may overlap the range, and the one it
  // may join at its end. The one before it joins the range at its start if it ends at `addr`.
  auto const next = by_end_.upper_bound(addr);
  if (next != by_end_.end() && next->second.start < end) return insert_result::overlaps;
  auto const prev = next == by_end_.begin() ? by_end_.end() : std::prev(next);
  bool const join_prev =
      prev != by_end_.end() && prev->first == addr && prev->second.chunk == chunk;
  bool const join_next =
      next != by_end_.end() && next->second.start == end && next->second.chunk == chunk;
  if (!join_prev && !join_next) {
    if (spare_.capacity() < spare_limit) spare_.reserve(spare_limit);  // may throw: no change yet
    pool_extent e;
    e.start = addr;
    e.size = size;
    e.epoch = epoch;
    e.chunk = chunk;
    link(*emplace(next, e));
    add_bytes(size);
    return insert_result::inserted;
  }
  if (join_next) {
    // The merged extent is next's node, whose key (its end) stays: no node moves.
    pool_extent& merged = next->second;
    merged.start = addr;
    merged.size += size;
    merged.epoch = std::max(merged.epoch, epoch);
    if (join_prev) {
      unlink(*prev);
      merged.start = prev->second.start;
      merged.size += prev->second.size;
      merged.epoch = std::max(merged.epoch, prev->second.epoch);
      drop_node(prev);
    }
    rebin(*next);
  } else {
    // Joins prev alone: prev's end moves up to `end` (the order is unchanged; the node, and with
    // it the entry the size bins link, is the same).
    prev->second.size += size;
    prev->second.epoch = std::max(prev->second.epoch, epoch);
    rebin(*rekey(prev, end));
  }
  add_bytes(size);
  return insert_result::inserted;
}

pool_extent_set::map::iterator pool_extent_set::erase(map::iterator it) noexcept {
  unlink(*it);
  remove_bytes(it->second.size);
  auto const next = std::next(it);
  drop_node(it);
  return next;
}

pool_extent_entry* pool_extent_set::best_fit(std::size_t size) noexcept {
  unsigned const home = bin_of(size);
  unsigned bin = next_bin(home);
  if (bin == bins) return nullptr;
  pool_extent_entry* best = nullptr;
  auto better = [&](pool_extent_entry const* e) {
    return best == nullptr || e->second.size < best->second.size ||
           (e->second.size == best->second.size && e->first < best->first);
  };
  if (bin == home) {
    // The request's own bin holds sizes on both sides of it: the smallest that fits. With a later
    // bin in use, a long search here is cut short (that bin's extents all fit).
    bool const later = next_bin(home + 1) != bins;
    std::size_t seen = 0;
    for (pool_extent_entry* e = heads_[home]; e != nullptr; e = e->second.bin_next) {
      if (e->second.size >= size && better(e)) best = e;
      if (++seen >= scan_limit && (best != nullptr || later)) break;
    }
    if (best != nullptr) return best;
    bin = next_bin(home + 1);
    if (bin == bins) return nullptr;
  }
  std::size_t seen = 0;
  for (pool_extent_entry* e = heads_[bin]; e != nullptr && seen < scan_limit;
       e = e->second.bin_next, ++seen)
    if (better(e)) best = e;
  return best;
}

pool_extent_entry* pool_extent_set::best_fit_batch(std::size_t size, std::uint32_t count) noexcept {
  pool_extent_entry* const e = best_fit(count * size);
  return e == nullptr && count > 1 ? best_fit(size) : e;
}

std::uintptr_t pool_extent_set::take(pool_extent_entry& e, std::size_t size) noexcept {
  std::uintptr_t const addr = e.second.start;
  if (e.second.size <= size) {
    erase(by_end_.find(e.first));  // the only lookup: the whole extent goes
    return addr;
  }
  // The rest keeps the extent's node and key (its end); its neighbours were not mergeable before,
  // nor now.
  e.second.start += size;
  e.second.size -= size;
  rebin(e);
  remove_bytes(size);
  return addr;
}

void pool_extent_set::cut_back(map::iterator it, std::size_t size) noexcept {
  if (it->second.size <= size) {
    erase(it);
    return;
  }
  it->second.size -= size;
  rebin(*rekey(it, it->first - size));
  remove_bytes(size);
}

void pool_extent_set::cut_out(map::iterator it, std::uintptr_t addr, std::size_t size) {
  pool_extent const whole = it->second;
  if (addr == whole.start) {
    take(*it, size);
    return;
  }
  if (addr + size == whole.start + whole.size) {
    cut_back(it, size);
    return;
  }
  // The part before the range gets a node of its own (the only step that may fail); the extent's
  // node keeps the part after it, and its key.
  if (spare_.capacity() < spare_limit) spare_.reserve(spare_limit);
  pool_extent head = whole;
  head.size = addr - whole.start;
  head.bin_prev = head.bin_next = nullptr;
  link(*emplace(it, head));
  add_bytes(head.size);
  take(*it, head.size + size);
}

pool_extent_set::map::iterator pool_extent_set::find_start(std::uintptr_t addr) noexcept {
  auto const it = by_end_.upper_bound(addr);
  return it != by_end_.end() && it->second.start == addr ? it : by_end_.end();
}

bool pool_extent_set::overlaps(std::uintptr_t addr, std::size_t size) const noexcept {
  auto const it = by_end_.upper_bound(addr);
  return it != by_end_.end() && it->second.start < addr + size;
}

std::size_t pool_extent_set::largest() const noexcept {
  if (used_words_ == 0) return 0;
  unsigned const word = highest_bit(used_words_);
  unsigned const bin = word * 64 + highest_bit(used_[word]);
  std::size_t most = 0;
  for (pool_extent_entry const* e = heads_[bin]; e != nullptr; e = e->second.bin_next)
    most = std::max(most, e->second.size);
  return most;
}

std::string pool_extent_set::validate_index() const {
  std::size_t listed = 0;
  for (unsigned bin = 0; bin < bins; ++bin) {
    bool const marked = (used_[bin / 64] >> (bin % 64)) & 1;
    if (marked != (heads_[bin] != nullptr))
      return "size bin " + std::to_string(bin) + " is " + (marked ? "" : "not ") +
             "marked in use but " + (heads_[bin] != nullptr ? "holds" : "holds no") + " extents";
    pool_extent_entry const* prev = nullptr;
    for (pool_extent_entry const* e = heads_[bin]; e != nullptr; e = e->second.bin_next) {
      if (++listed > by_end_.size())
        return "the size bins list more entries than the set's " + std::to_string(by_end_.size()) +
               " extents";
      if (e->second.bin_prev != prev)
        return "size bin " + std::to_string(bin) + " has a broken backward link";
      if (bin_of(e->second.size) != bin || e->second.bin != bin)
        return "an extent of " + std::to_string(e->second.size) + " B is in size bin " +
               std::to_string(bin) + " (it names bin " + std::to_string(e->second.bin) + ")";
      if (e->first != e->second.start + e->second.size)
        return "the extent at " + std::to_string(e->second.start) + " is keyed by " +
               std::to_string(e->first) + ", not by its end";
      auto const found = by_end_.find(e->first);
      if (found == by_end_.end() || &*found != e)
        return "size bin " + std::to_string(bin) + " lists an extent that is not in the set";
      prev = e;
    }
  }
  for (unsigned word = 0; word < bin_words; ++word)
    if (((used_words_ >> word) & 1) != (used_[word] != 0 ? 1u : 0u))
      return "size-bin word " + std::to_string(word) + " is marked wrongly";
  if (listed != by_end_.size())
    return std::to_string(by_end_.size()) + " extents but " + std::to_string(listed) +
           " size-bin entries";
  return {};
}

}  // namespace gpumem::detail
