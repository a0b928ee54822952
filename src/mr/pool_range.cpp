// pool_resource's expandable growth (pool_options::expandable): the pool's memory is one chunk, the
// used part of one reserved virtual range, backed page by page (pool_vrange). A request larger
// than any free extent needs only the pages that the free memory around some place lacks, and
// those pages take the physical memory of whole pages lying in free memory elsewhere in the range
// before any is created: what the pool holds follows what is live, not every shape the workload
// has had, and the holes left behind cost address space, not memory.
//
// A growth, planned under the pool's mutex (plan_range_locked):
//   * where: the free end of the chunk and pages after it, or a hole (unmapped pages, range_.holes)
//     with the free extents on either side, whichever needs the fewest pages mapped (a hole on a
//     tie: the range stays compact). Free extents are those free for every stream and the
//     growing stream's own; they are taken out of the extents (claimed) while the pages are
//     mapped, so that no other thread carves them meanwhile, and the block fits once it is done;
//   * the memory: new while the pool then holds at most held_target times the most it has had
//     live at a growth (times range_.slack, raised by note_range_move_locked while growths that
//     move memory come too often); the rest from whole pages of free extents, the largest first
//     (the growing stream's own only when its work is done up to them: found idle, or waited for
//     when it holds at least the request and trim_before_growth allows a wait), taken from the
//     top of their whole pages. Those pages are unmapped, and the target mapped with their
//     physical memory first, then new memory (what maximum_size bounds);
//   * done: the target and the claimed free memory around it become one extent, free for every
//     stream (the growing stream's own when part of it was); the unmapped pages become holes. A
//     hole never ends the chunk: the chunk ends before it.
// The mapping runs without the pool's mutex (CUDA's map calls take tens of microseconds each);
// growths map one at a time under range_.mutex.
//
// The defaults (page_size 4 MiB, held_target 1.125), measured on the host with bench_alloc's
// traces on one thread, four passes: held / live peak of the training loop, of the inference loop
// and of the PyTorch replay, and the map and unmap calls per warm pass of that replay (about 18
// steps of the loop; on an H100 a call takes 18-27 us):
//   page 2 MiB, target 1:     1.06, 1.14, 1.04, 269 calls;  target 1.125: 1.12, 1.15, 1.13, 101
//   page 4 MiB, target 1:     1.12, 1.15, 1.05,  97 calls;  target 1.125: 1.12, 1.16, 1.12,  37
//   page 8 MiB, target 1:     1.18, 1.20, 1.08,  42 calls;  target 1.125: 1.18, 1.20, 1.12,  29
//   no moves (target infinity), 4 MiB pages: 1.27, 1.38, 1.18, 14 calls.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>
#include <limits>
#include <new>

namespace gpumem::detail {

struct pool_range_plan {
  // Free memory of the range: where it was taken from, to put it back.
  struct piece {
    std::uintptr_t addr;
    std::size_t size;
    bool owned;  // the growing stream's extents (else the free ones)
  };
  std::uintptr_t target = 0;  // the pages to map
  std::size_t target_bytes = 0;
  std::vector<piece> neighbours;      // claimed: they and the target become one extent
  std::vector<piece> sources;         // whole pages whose memory moves to the target
  std::vector<std::size_t> unmapped;  // per source, the bytes unmapped
  std::size_t source_bytes = 0;
  std::size_t fresh_bytes = 0;  // new memory: counted in growing_ while it is mapped
};

bool pool_state::grow_range(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream* s) {
  // The stream's own extents give their pages only once its work is done up to them. Idle, it is;
  // otherwise it is waited for when it holds at least the request: those pages may spare new
  // memory, as a chunked pool's trim before growth may wait (cudaFree waits for the device).
  std::size_t const need = pool_round_up(size);
  std::size_t const fresh = fresh_allowance_locked(need);
  std::uint64_t own_upto = 0;
  if (fresh < need && s != nullptr && fenceable(*s) && s->extents.bytes() >= vrange_->page()) {
    own_upto = cut_epoch_locked(*s);
    ++counts_.device_queries;
    if (!backend_.query_stream(s->handle)) {
      if (options_.trim_before_growth && s->extents.bytes() >= need) {
        lock.unlock();
        backend_.synchronize_stream(s->handle);
        lock.lock();
        ++counts_.synchronizations;
      } else {
        own_upto = 0;
      }
    }
  }
  pool_range_plan plan;
  if (!plan_range_locked(plan, size, s, own_upto, fresh)) return false;
  std::uintptr_t const base = vrange_->base();
  lock.unlock();
  std::unique_lock<std::mutex> range(range_.mutex);
  std::size_t const before = vrange_->mapped();
  bool mapped = false;
  std::exception_ptr error;
  for (auto const& source : plan.sources)
    plan.unmapped.push_back(vrange_->unmap(source.addr - base, source.size));
  try {
    vrange_->map(plan.target - base, plan.target_bytes);
    mapped = true;
  } catch (out_of_memory const&) {
  } catch (...) {
    error = std::current_exception();
  }
  vrange_->release_spares();
  std::size_t const after = vrange_->mapped();
  lock.lock();  // range_.mutex first, then mutex_: the order of every growth
  std::size_t unmapped = 0;
  for (std::size_t bytes : plan.unmapped)
    unmapped += bytes;
  if (unmapped > 0) ++counts_.upstream_deallocations;
  range_.pages_unmapped += unmapped / vrange_->page();
  if (mapped) range_.pages_mapped += plan.target_bytes / vrange_->page();
  if (after < before) {
    held_ -= before - after;
    held_hint_.store(held_, std::memory_order_relaxed);
  }
  finish_range_locked(plan, s, mapped);
  if (mapped) note_growth_locked(after > before ? after - before : 0);
  if (mapped && unmapped > 0) note_range_move_locked();
  if (error) std::rethrow_exception(error);
  return mapped;
}

bool pool_state::plan_range_locked(pool_range_plan& plan, std::size_t size, pool_stream* s,
                                   std::uint64_t own_upto, std::size_t fresh) {
  std::unique_lock<pool_lock> arena;
  if (s != nullptr) arena = std::unique_lock<pool_lock>(s->mutex);
  std::size_t const page = vrange_->page();
  std::size_t const need = pool_round_up(size);
  std::uintptr_t const base = vrange_->base();
  std::size_t const used = range_.chunk != nullptr ? range_.chunk->size : 0;
  // Free memory that may join the growth: free extents and `s`'s own, extent after touching
  // extent (the two sets alternate: each keeps its own merged), from `addr` down or up.
  auto walk = [&](std::uintptr_t addr, bool up, auto&& visit) {
    auto in = [&](pool_extent_set& set) {
      auto const it = up ? set.find_start(addr) : set.find_end(addr);
      return it != set.extents().end() && it->second.chunk == range_.chunk ? it
                                                                           : set.extents().end();
    };
    for (;;) {
      bool owned = false;
      auto it = in(free_);
      if (it == free_.extents().end()) {
        if (s == nullptr) return;
        it = in(s->extents);
        if (it == s->extents.extents().end()) return;
        owned = true;
      }
      visit(it->second.start, it->second.size, owned);
      addr = up ? it->second.start + it->second.size : it->second.start;
    }
  };
  auto free_run = [&](std::uintptr_t addr, bool up) {
    std::size_t bytes = 0;
    walk(addr, up, [&](std::uintptr_t, std::size_t piece, bool) { bytes += piece; });
    return bytes;
  };

  // At the end: its free memory and the pages after it.
  std::size_t const tail = used > 0 ? free_run(base + used, false) : 0;
  std::size_t const room = vrange_->capacity() - used;
  std::size_t const missing = pool_round_up_to(need - std::min(need, tail), page);
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::size_t best = missing <= room ? missing : none;
  // In a hole: the free memory on either side and as many of its pages as that lacks.
  std::uintptr_t hole = 0;
  std::uintptr_t hole_end = 0;
  std::size_t best_run = 0;
  for (auto const& [end, h] : range_.holes.extents()) {
    std::size_t const before = free_run(h.start, false);
    std::size_t const run = before + h.size + free_run(end, true);
    if (before >= need || run < need) continue;
    std::size_t const pages = std::min(h.size, pool_round_up_to(need - before, page));
    if (pages < best || (pages == best && (hole == 0 || run < best_run))) {
      best = pages;
      best_run = run;
      hole = h.start;
      hole_end = end;
    }
  }
  if (best == none) return false;

  // The free memory around the target is claimed with it (listed first: that may throw).
  auto claim = [&](std::uintptr_t addr, std::size_t piece, bool owned) {
    plan.neighbours.push_back({addr, piece, owned});
  };
  if (hole != 0) {
    plan.target = hole;
    plan.target_bytes = best;
    walk(hole, false, claim);
    if (hole + best == hole_end) walk(hole_end, true, claim);
  } else {
    // With the growth step's slack, as a chunked pool grows, so that the next misses find room.
    std::size_t const step = growth_step_locked() / page * page;
    plan.target = base + used;
    plan.target_bytes =
        std::min({std::max(missing, step), pool_round_up_to(need, page) + step, room});
    if (used > 0) walk(base + used, false, claim);
  }
  for (auto const& n : plan.neighbours) {
    pool_extent_set& set = n.owned ? s->extents : free_;
    set.erase(set.find_start(n.addr));
    range_.claimed_bytes += n.size;
  }
  try {
    choose_sources_locked(plan, s, own_upto, fresh);
  } catch (...) {  // no memory for the list of sources: nothing taken but the neighbours
    arena = {};
    plan.target_bytes = 0;
    finish_range_locked(plan, s, false);
    throw;
  }

  // New memory within maximum_size: the slack at the end gives way first.
  std::size_t const taken = held_ + growing_;
  std::size_t const limit = taken > options_.maximum_size ? 0 : options_.maximum_size - taken;
  if (plan.target_bytes - std::min(plan.target_bytes, plan.source_bytes) > limit && hole == 0)
    plan.target_bytes =
        std::max(plan.source_bytes, std::max(missing, (plan.source_bytes + limit) / page * page));
  plan.fresh_bytes = plan.target_bytes - std::min(plan.target_bytes, plan.source_bytes);
  if (plan.fresh_bytes > limit || plan.target_bytes == 0) {
    arena = {};
    plan.target_bytes = 0;  // nothing claimed there yet, nor counted in growing_
    plan.fresh_bytes = 0;
    finish_range_locked(plan, s, false);
    return false;
  }
  if (hole != 0) {
    range_.holes.take(*range_.holes.find_start(hole), plan.target_bytes);
  } else {
    std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
    if (range_.chunk == nullptr) {
      range_.chunk = &chunks_.try_emplace(base).first->second;
      range_.chunk->base = base;
      range_.chunk->mapped = true;
    }
    range_.chunk->size += plan.target_bytes;
  }
  growing_ += plan.fresh_bytes;
  return true;
}

void pool_state::choose_sources_locked(pool_range_plan& plan, pool_stream* s,
                                       std::uint64_t own_upto, std::size_t fresh) {
  std::size_t const page = vrange_->page();
  // What new memory within the allowance does not cover is moved.
  std::size_t const wanted = plan.target_bytes - std::min(plan.target_bytes, fresh / page * page);
  if (wanted == 0) return;
  std::uintptr_t const base = vrange_->base();
  struct candidate {
    std::uintptr_t start;
    bool owned;
    std::uintptr_t pages_end;  // the whole pages inside the extent end here
    std::size_t pages_bytes;
  };
  std::vector<candidate> found;
  auto scan = [&](pool_extent_set const& set, bool owned) {
    for (auto const& [end, e] : set.extents()) {
      if (e.chunk != range_.chunk || e.size < page || (owned && e.epoch > own_upto)) continue;
      std::uintptr_t const first = base + pool_round_up_to(e.start - base, page);
      std::uintptr_t const last = base + (end - base) / page * page;
      if (last > first) found.push_back({e.start, owned, last, last - first});
    }
  };
  try {
    scan(free_, false);
    if (s != nullptr && own_upto > 0) scan(s->extents, true);
  } catch (std::bad_alloc const&) {
    // Fewer candidates: new memory instead.
  }
  std::sort(found.begin(), found.end(),
            [](candidate const& a, candidate const& b) { return a.pages_bytes > b.pages_bytes; });
  // Reserved before any source is taken, so that none can be lost to a failed push.
  plan.sources.reserve(found.size());
  plan.unmapped.reserve(found.size());
  for (candidate const& c : found) {
    if (plan.source_bytes >= wanted) break;
    std::size_t const bytes = std::min(c.pages_bytes, wanted - plan.source_bytes);
    pool_extent_set& set = c.owned ? s->extents : free_;
    try {
      set.cut_out(set.find_start(c.start), c.pages_end - bytes, bytes);
    } catch (std::bad_alloc const&) {
      continue;
    }
    plan.sources.push_back({c.pages_end - bytes, bytes, c.owned});
    plan.source_bytes += bytes;
  }
  if (s != nullptr) s->unfenced_bytes = std::min(s->unfenced_bytes, s->extents.bytes());
}

std::size_t pool_state::live_estimate_locked() const noexcept {
  std::size_t idle = free_.bytes() + range_.claimed_bytes;
  for (auto const& entry : streams_)
    idle += entry.second->extents.bytes() +
            entry.second->class_list_bytes.load(std::memory_order_relaxed);
  for (auto const& cache : caches_)
    idle += static_cast<std::size_t>(
        std::max<std::int64_t>(0, cache->counters.cached_bytes.load(std::memory_order_relaxed)));
  return held_ - std::min(held_, idle);
}

std::size_t pool_state::fresh_allowance_locked(std::size_t need) noexcept {
  std::size_t const live = live_estimate_locked();
  range_.live_at_growth =
      std::max(range_.live_at_growth, live + std::min(need, ~std::size_t{0} - live));
  double const most =
      options_.held_target * range_.slack * static_cast<double>(range_.live_at_growth);
  std::size_t const allowed = most >= 0x1p64 ? ~std::size_t{0} : static_cast<std::size_t>(most);
  std::size_t const taken = held_ + growing_;
  return allowed > taken ? allowed - taken : 0;
}

void pool_state::note_range_move_locked() noexcept {
  // Memory is moved (pages unmapped here, mapped there: about 20 us a call on an H100) so that
  // the pool holds about held_target times what is live. With several streams that each keep
  // what they freed, the target can sit below what their arenas need together: each move leaves
  // another stream short, whose growth moves memory again. On the host backend, 16 threads on
  // bench_alloc's large trace with threads kept across runs moved memory at about one growth per
  // 64 allocations (thousands per run, 9 us per pair) with any held_target up to 1.5, and not
  // at all with 3 (held 1.22x the sum of the threads' peaks, as a chunked pool). So when a growth
  // that moved memory comes within sixteen times pool_range_move_allocations allocations of the
  // sixteenth such growth before it (range_.moves_at), the target is raised by an eighth (up to
  // held_target_most), and the count starts again. That trace then moved memory a few times in a
  // run (about 200 ns per pair). A window of eight moves raised the target on the bursts of a
  // loop (the inference loop's prefill) as well; lowering it again after calm windows held no
  // less. The one-thread loops whose shapes change every step keep their target: bench_alloc's
  // replays held 1.031 and 1.042 times their peak live with the guard and without it, and the
  // training and inference loops the same on one thread (1.05 and 1.17).
  constexpr std::uint64_t pool_range_move_allocations = 128;
  // At or below held_target (an infinite held_target included: most / held_target would be NaN,
  // which std::min ignores, leaving range_.slack unbounded): never raised.
  if (!(options_.held_target_most > options_.held_target)) return;
  std::uint64_t const now = allocations_locked();
  std::size_t const watched = range_.moves_at.size();
  std::uint64_t const oldest = range_.moves_at[range_.moves_seen % watched];
  range_.moves_at[range_.moves_seen % watched] = now;
  ++range_.moves_seen;
  if (range_.moves_seen <= watched || now - oldest >= pool_range_move_allocations * watched) return;
  range_.slack = std::min(range_.slack * 1.125, options_.held_target_most / options_.held_target);
  range_.moves_seen = 0;
}

void pool_state::finish_range_locked(pool_range_plan& plan, pool_stream* s, bool mapped) noexcept {
  std::unique_lock<pool_lock> arena;
  if (s != nullptr) arena = std::unique_lock<pool_lock>(s->mutex);
  growing_ -= plan.fresh_bytes;
  for (std::size_t i = 0; i < plan.sources.size(); ++i) {
    auto const& source = plan.sources[i];
    std::size_t const gone = i < plan.unmapped.size() ? plan.unmapped[i] : 0;
    if (gone > 0) add_hole_locked(source.addr, gone);
    if (gone < source.size)
      put_back_locked(source.addr + gone, source.size - gone, source.owned ? s : nullptr);
  }
  // Mapped, the target joins its neighbours: in the free extents, for every stream (as a chunked
  // pool's growth), unless one of them is the stream's own (its work may still use it): then all of
  // them go to the stream, so that they make one extent.
  pool_stream* joined = nullptr;
  for (auto const& n : plan.neighbours)
    if (n.owned) joined = s;
  for (auto const& n : plan.neighbours) {
    range_.claimed_bytes -= n.size;
    put_back_locked(n.addr, n.size, mapped ? joined : n.owned ? s : nullptr);
  }
  growth_done_.notify_all();  // the waiters need the mutex: they see what follows too
  if (plan.target_bytes == 0) return;
  if (mapped)
    put_back_locked(plan.target, plan.target_bytes, joined);
  else
    add_hole_locked(plan.target, plan.target_bytes);
}

void pool_state::put_back_locked(std::uintptr_t addr, std::size_t size, pool_stream* s) noexcept {
  try {
    if (s == nullptr) {
      add_extent(free_, addr, size, 0, range_.chunk);
    } else if (add_extent(s->extents, addr, size, s->epoch, range_.chunk)) {
      s->unfenced_bytes += size;
    }
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": lost " + format_bytes(size) + " at " + pool_hex(addr) +
                              " of its range: " + e.what());
  }
}

void pool_state::add_hole_locked(std::uintptr_t addr, std::size_t size) noexcept {
  if (range_.chunk == nullptr) return;  // cannot be: the hole lies in the chunk
  try {
    range_.holes.insert(addr, size, 0, range_.chunk);
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": could not record " + format_bytes(size) + " unmapped at " +
                              pool_hex(addr) + ": " + e.what());
    return;
  }
  // A hole that ends the chunk ends it earlier instead.
  auto const last = range_.holes.find_end(range_.chunk->base + range_.chunk->size);
  if (last == range_.holes.extents().end()) return;
  std::size_t const cut = last->second.size;
  range_.holes.erase(last);
  std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
  range_.chunk->size -= cut;
  if (range_.chunk->size == 0) {
    chunks_.erase(range_.chunk->base);
    range_.chunk = nullptr;
  }
}

std::size_t pool_state::shrink_range_locked() noexcept {
  if (range_.chunk == nullptr) return 0;
  std::unique_lock<std::mutex> range(range_.mutex, std::try_to_lock);
  if (!range) return 0;  // a growth is mapping: leave the range to it
  std::size_t const page = vrange_->page();
  std::uintptr_t const base = vrange_->base();
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> pages;  // [first, last) per extent
  try {
    for (auto const& [end, e] : free_.extents()) {
      std::uintptr_t const first = base + pool_round_up_to(e.start - base, page);
      std::uintptr_t const last = base + (end - base) / page * page;
      if (e.chunk == range_.chunk && last > first) pages.emplace_back(first, last);
    }
  } catch (std::bad_alloc const&) {
  }
  std::size_t released = 0;
  for (auto const& [first, last] : pages) {
    auto const it = free_.extents().upper_bound(first);  // the extent holding the pages
    try {
      free_.cut_out(it, first, last - first);
    } catch (std::bad_alloc const&) {
      continue;
    }
    std::size_t const gone = vrange_->unmap(first - base, last - first);
    if (gone < last - first) put_back_locked(first + gone, last - first - gone, nullptr);
    if (gone > 0) add_hole_locked(first, gone);
    released += gone;
  }
  vrange_->release_spares();
  if (released == 0) return 0;
  held_ -= released;
  held_hint_.store(held_, std::memory_order_relaxed);
  ++counts_.upstream_deallocations;
  range_.pages_unmapped += released / page;
  return released;
}

}  // namespace gpumem::detail
