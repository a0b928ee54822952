// pool_resource's full-structure validator (tests call it after every step of the model-based
// stress test). Independent of the fast paths: it rebuilds the picture of every chunk from the
// indexes and checks that they agree.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace gpumem::detail {

namespace {

enum class range_kind { free, owned, listed, cached, live, hole };

char const* to_text(range_kind k) {
  switch (k) {
    case range_kind::free:
      return "free";
    case range_kind::owned:
      return "stream-owned";
    case range_kind::listed:
      return "in a stream class list";
    case range_kind::cached:
      return "in a thread cache";
    case range_kind::live:
      return "live";
    case range_kind::hole:
      return "unmapped";
  }
  return "?";
}

struct range {
  std::uintptr_t addr;
  std::size_t size;
  range_kind kind;
};

[[noreturn]] void fail(std::string const& pool, std::string const& what) {
  throw logic_error(pool + ": invariant violated: " + what);
}

std::string at(std::uintptr_t addr) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(addr));
  return text;
}

}  // namespace

void pool_state::check_invariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::lock_guard<std::mutex> tracking(tracking_mutex_);
  std::string const me = name();
  std::vector<range> ranges;

  // Extents: each set's indexes agree; every extent granular, inside its chunk, and maximal (not
  // adjacent to another of its set in the same chunk); a stream's extents have epochs after its
  // last completed fence and not from the future.
  auto check_set = [&](pool_extent_set const& set, pool_stream const* owner, range_kind kind) {
    std::string const index_problem = set.validate_index();
    if (!index_problem.empty()) fail(me, index_problem);
    std::size_t sum = 0;
    std::uintptr_t prev_end = 0;
    pool_chunk const* prev_chunk = nullptr;
    for (auto const& [end, e] : set.extents()) {
      std::uintptr_t const addr = e.start;  // the map is keyed by the end (validate_index checks)
      if (e.size == 0 || e.size % pool_granularity != 0 || addr % pool_granularity != 0)
        fail(me, "extent " + at(addr) + " has size " + std::to_string(e.size));
      if (e.chunk == nullptr || addr < e.chunk->base ||
          addr + e.size > e.chunk->base + e.chunk->size)
        fail(me, "extent " + at(addr) + " is not inside its chunk");
      if (prev_chunk == e.chunk && prev_end == addr)
        fail(me, "extents ending and starting at " + at(addr) +
                     " have the same owner but were not merged");
      if (owner != nullptr) {
        if (e.epoch > owner->epoch)
          fail(me, "extent " + at(addr) + " has an epoch from the future");
        if (e.epoch <= owner->completed)
          fail(me, "extent " + at(addr) + " is covered by a completed fence but still owned");
      }
      sum += e.size;
      ranges.push_back({addr, e.size, kind});
      prev_end = addr + e.size;
      prev_chunk = e.chunk;
    }
    if (sum != set.bytes())
      fail(me, std::string(owner != nullptr ? "a stream's owned" : "free") + " bytes counter " +
                   std::to_string(set.bytes()) + " != " + std::to_string(sum));
    return sum;
  };
  std::size_t const free_sum = check_set(free_, nullptr, range_kind::free);

  std::size_t owned_total = 0;
  std::size_t listed_total = 0;
  for (auto const& entry : streams_) {
    pool_stream const& s = *entry.second;
    std::lock_guard<pool_lock> arena(s.mutex);
    owned_total += check_set(s.extents, &s, range_kind::owned);
    std::uint64_t last = s.completed;
    for (auto const& fence : s.fences) {
      if (fence.epoch <= last || fence.epoch >= s.epoch) fail(me, "fence epochs out of order");
      last = fence.epoch;
    }
    std::size_t listed = 0, merged = 0;
    for (unsigned c = 0; c < num_classes_; ++c)
      for (void* p : s.class_lists[c]) {
        ranges.push_back(
            {reinterpret_cast<std::uintptr_t>(p), pool_class_size(c), range_kind::listed});
        listed += pool_class_size(c);
        merged += merged_class(c) ? pool_class_size(c) : 0;
      }
    if (listed != s.class_list_bytes.load())
      fail(me, "a stream's class-list bytes " + std::to_string(s.class_list_bytes.load()) +
                   " != " + std::to_string(listed));
    if (merged != s.merged_listed)
      fail(me, "a stream's merged-class list bytes " + std::to_string(s.merged_listed) +
                   " != " + std::to_string(merged));
    listed_total += listed;
  }

  std::int64_t cached_total = 0;
  std::int64_t live_total = static_cast<std::int64_t>(counts_.large_live) + counts_.retired_live;
  for (auto const& cache : caches_) {
    std::int64_t cached = 0;
    for (unsigned c = 0; c < cache->num_classes; ++c) {
      pool_bin const& bin = cache->bins[c];
      if (bin.count > bin.cap) fail(me, "a thread cache bin holds more than its capacity");
      for (std::uint32_t i = 0; i < bin.count; ++i)
        ranges.push_back({reinterpret_cast<std::uintptr_t>(bin.slots[i]), pool_class_size(c),
                          range_kind::cached});
      cached += static_cast<std::int64_t>(bin.count * pool_class_size(c));
    }
    if (cached != cache->counters.cached_bytes.load())
      fail(me, "a thread cache counts " + std::to_string(cache->counters.cached_bytes.load()) +
                   " cached bytes but holds " + std::to_string(cached));
    cached_total += cached;
    live_total += cache->counters.live_bytes.load();
  }

  std::size_t live_tracked = 0;
  for (auto const& [addr, block] : tracked_) {
    ranges.push_back({addr, block.size, range_kind::live});
    live_tracked += block.size;
  }

  // Holes: whole pages of the range, never its chunk's end; not counted as held.
  std::string const holes_problem = range_.holes.validate_index();
  if (!holes_problem.empty()) fail(me, "holes: " + holes_problem);
  for (auto const& [end, e] : range_.holes.extents()) {
    std::size_t const page = vrange_->page();
    if (e.chunk != range_.chunk || range_.chunk == nullptr || e.start < range_.chunk->base ||
        end >= range_.chunk->base + range_.chunk->size || (e.start - vrange_->base()) % page ||
        e.size % page)
      fail(me, "unmapped pages at " + at(e.start) + " are not whole pages inside the range");
    for (std::uintptr_t p = e.start; p < end; p += page)
      if (vrange_->is_mapped(p - vrange_->base()))
        fail(me, "the page at " + at(p) + " is mapped but counted as unmapped");
    ranges.push_back({e.start, e.size, range_kind::hole});
  }

  // Every range inside one chunk, no two overlapping.
  std::sort(ranges.begin(), ranges.end(),
            [](range const& a, range const& b) { return a.addr < b.addr; });
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    range const& r = ranges[i];
    auto it = chunks_.upper_bound(r.addr);
    if (it == chunks_.begin() ||
        r.addr + r.size > std::prev(it)->second.base + std::prev(it)->second.size)
      fail(me, std::string(to_text(r.kind)) + " block " + at(r.addr) + " is outside every chunk");
    if (i > 0 && ranges[i - 1].addr + ranges[i - 1].size > r.addr)
      fail(me, std::string(to_text(ranges[i - 1].kind)) + " block " + at(ranges[i - 1].addr) +
                   " overlaps " + to_text(r.kind) + " block " + at(r.addr));
  }

  std::size_t held = 0;
  for (auto const& [base, chunk] : chunks_) {
    if (chunk.base != base) fail(me, "chunk key mismatch at " + at(base));
    held += chunk.size;
  }
  held -= range_.holes.bytes();
  if (vrange_ != nullptr &&
      vrange_->mapped() != (range_.chunk ? range_.chunk->size : 0) - range_.holes.bytes())
    fail(me, "the range maps " + std::to_string(vrange_->mapped()) +
                 " bytes, not its chunk less its unmapped pages");
  if (held != held_)
    fail(me, "held counter " + std::to_string(held_) + " != " + std::to_string(held));

  std::size_t const accounted = free_sum + range_.claimed_bytes + owned_total + listed_total +
                                lost_bytes_.load() + static_cast<std::size_t>(cached_total) +
                                static_cast<std::size_t>(std::max<std::int64_t>(0, live_total));
  if (live_total < 0) fail(me, "live bytes are negative: " + std::to_string(live_total));
  if (accounted != held)
    fail(me, "held " + std::to_string(held) +
                 " bytes but free + stream-owned + cached + live = " + std::to_string(accounted));
  if (options_.track_blocks && live_tracked != static_cast<std::size_t>(live_total))
    fail(me, "tracked live blocks hold " + std::to_string(live_tracked) + " bytes, counters say " +
                 std::to_string(live_total));
}

}  // namespace gpumem::detail
