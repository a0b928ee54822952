// The back end of pool_resource: chunks from the upstream, the coalescing best fit over free
// extents, per-stream ownership with batched fences, growth, trim and out-of-memory.
// Every function named *_locked runs with mutex_ held.
#include "pool_state.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/detail/thread_identity.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>

namespace gpumem::detail {

namespace {

std::atomic<std::uint64_t> next_pool_id{1};

std::string hex(std::uintptr_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// After this many misses that had to merge every cache and list back (and then found a fit), the
// next such miss grows the pool instead: see obtain.
constexpr std::uint64_t pool_thrash_misses = 8;

}  // namespace

std::mutex& pool_registry_mutex() noexcept {
  static auto* mutex = new std::mutex();  // leaked: thread exit may run after static destructors
  return *mutex;
}

pool_state::pool_state(memory_resource& upstream, pool_options const& options)
    : upstream_(upstream),
      options_(options),
      backend_(options.backend != nullptr ? *options.backend : backend()),
      device_(backend_.current_device()),
      num_classes_(0),
      id_(next_pool_id.fetch_add(1)) {
  GPUMEM_EXPECTS(options.max_cached_size <= 4 * GiB, "pool_options::max_cached_size " +
                                                         format_bytes(options.max_cached_size) +
                                                         " is above the 4 GiB limit");
  GPUMEM_EXPECTS(options.chunk_size > 0 && options.chunk_size <= max_allocation_bytes,
                 "pool_options::chunk_size " + std::to_string(options.chunk_size) +
                     " is not between 1 byte and " + format_bytes(max_allocation_bytes));
  GPUMEM_EXPECTS(options.initial_size <= options.maximum_size,
                 "pool_options::initial_size " + format_bytes(options.initial_size) +
                     " exceeds maximum_size " + format_bytes(options.maximum_size));
  num_classes_ = options.max_cached_size >= pool_granularity
                     ? pool_size_class(options.max_cached_size) + 1
                     : 0;
  // Cached sizes must be exactly the class sizes up to the limit.
  if (num_classes_ > 0) options_.max_cached_size = pool_class_size(num_classes_ - 1);
  per_thread_handle_ = backend_.per_thread_default_stream();
  has_per_thread_handle_ = true;
  if (options.expandable) {
    std::size_t device = options.maximum_size;
    try {
      device = backend_.get_memory_info().total;
    } catch (std::exception const&) {
    }
    vrange_ = std::make_unique<pool_vrange>(backend_, std::min(device, options.maximum_size));
  }
  if (options.initial_size > 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!grow(lock, options.initial_size))
      throw out_of_memory(options.initial_size, name(), 0, 0,
                          "the upstream could not provide the initial pool size");
  }
}

pool_state::~pool_state() {
  std::optional<scoped_device> on_device;
  try {
    on_device.emplace(backend_, device_);
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": could not make device " + std::to_string(device_) +
                              " current in the destructor: " + e.what());
  }
  {
    std::lock_guard<std::mutex> registry(pool_registry_mutex());
    for (auto& cache : caches_)
      cache->pool.store(nullptr);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  bool pending = false;
  for (auto& entry : streams_)
    pending |= !entry.second->fences.empty() || entry.second->extents.bytes() > 0 ||
               entry.second->class_list_bytes.load() > 0;
  try {
    // Memory freed on a stream may still be in use by work queued before the free.
    if (pending) backend_.synchronize();
  } catch (std::exception const& e) {
    log(log_level::error,
        std::string("pool_resource: synchronize failed in destructor: ") + e.what());
  }
  auto const live = static_cast<std::int64_t>(large_live_) + retired_live_ + [&] {
    std::int64_t sum = 0;
    for (auto& c : caches_)
      sum += c->counters.live_bytes.load();
    return sum;
  }();
  if (live > 0)
    log(log_level::warn, name() + " destroyed with " +
                             format_bytes(static_cast<std::size_t>(live)) + " still allocated");
  for (auto& entry : streams_)
    for (auto& fence : entry.second->fences)
      spare_events_.push_back(fence.event);
  for (event_handle event : spare_events_) {
    try {
      backend_.destroy_event(event);
    } catch (...) {
    }
  }
  for (auto& entry : chunks_)
    if (!entry.second.mapped)
      upstream_.deallocate(reinterpret_cast<void*>(entry.second.base), entry.second.size, nullptr);
  vrange_.reset();  // unmaps the range
  if (growth_stream_ != nullptr) {
    try {
      backend_.destroy_stream(growth_stream_);
    } catch (...) {
    }
  }
}

std::string pool_state::name() const {
  return "pool_resource over " + upstream_.name();
}

// --- streams and fences --------------------------------------------------------------------------

pool_stream& pool_state::stream_locked(stream_handle handle) {
  bool const per_thread = is_per_thread(handle);
  auto const key = std::make_pair(handle, per_thread ? this_thread_serial() : std::uint64_t{0});
  auto it = streams_.find(key);
  if (it != streams_.end()) return *it->second;
  if (per_thread) reap_retired_locked();  // threads come and go: their entries must not pile up
  auto s = std::make_unique<pool_stream>();
  s->handle = handle;
  s->owner_thread = key.second;
  s->per_thread = per_thread;
  // A thread past its thread cache table (its thread_local destructors) has no cache to settle
  // this stream at its exit: the entry is retired from the start (its frees are fenced at once).
  s->retired = per_thread && pool_thread_exiting();
  s->class_lists.resize(num_classes_);
  s->class_used.resize(num_classes_);
  pool_stream& added = *streams_.emplace(key, std::move(s)).first->second;
  stream_count_.store(streams_.size(), std::memory_order_relaxed);
  return added;
}

bool pool_state::fenceable(pool_stream const& s) const noexcept {
  // The per-thread default stream names the caller's own stream: only its thread may record on it.
  return !s.per_thread || s.owner_thread == this_thread_serial();
}

void pool_state::reap_retired_locked() noexcept {
  for (auto it = streams_.begin(); it != streams_.end();) {
    pool_stream const& s = *it->second;
    if (s.retired && s.pins == 0 && s.fences.empty() && s.extents.bytes() == 0 &&
        s.class_list_bytes.load(std::memory_order_relaxed) == 0)
      it = streams_.erase(it);
    else
      ++it;
  }
  stream_count_.store(streams_.size(), std::memory_order_relaxed);
}

event_handle pool_state::take_event_locked() {
  if (!spare_events_.empty()) {
    event_handle e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  scoped_device const on_device(backend_, device_);
  return backend_.create_event(false);
}

// Covers the stream's extents handed back so far. Its class lists stay private to it (blocks
// drained from them later take the then-current epoch, so a fence never covers a block that was
// still listed when it was recorded): fencing is one event record, never a walk over the lists.
// The record happens under the stream's lock, so no extent is handed back between the record and
// the epoch's increment.
void pool_state::fence_locked(pool_stream& s) {
  if (!fenceable(s)) return;
  std::lock_guard<std::mutex> arena(s.mutex);
  if (s.unfenced_bytes == 0) return;
  event_handle event = take_event_locked();
  try {
    backend_.record_event(event, s.handle);
  } catch (...) {
    spare_events_.push_back(event);
    throw;
  }
  s.fences.push_back({event, s.epoch});
  ++s.epoch;
  s.unfenced_bytes = 0;
  s.net_returned = 0;
  ++events_recorded_;
}

std::uint64_t pool_state::cut_epoch_locked(pool_stream& s) {
  std::lock_guard<std::mutex> arena(s.mutex);
  return s.epoch++;
}

void pool_state::complete_all_fences_locked(pool_stream& s, std::uint64_t upto) {
  // Fences are recorded only under mutex_, so every fence of `s` predates the cut.
  for (auto& fence : s.fences)
    spare_events_.push_back(fence.event);
  events_completed_ += s.fences.size();
  s.fences.clear();
  release_owner_locked(s, upto);
}

bool pool_state::complete_if_idle_locked(pool_stream& s) {
  if (!fenceable(s)) return false;
  std::uint64_t const upto = cut_epoch_locked(s);
  // An idle stream has finished everything queued before every free handed back up to the cut:
  // no event is needed for them.
  if (!backend_.query_stream(s.handle)) return false;
  complete_all_fences_locked(s, upto);
  return true;
}

void pool_state::settle_locked(pool_stream& s) {
  drain_class_lists_locked(s);
  if (s.extents.bytes() == 0 && s.fences.empty()) return;
  if (!fenceable(s)) return;
  if (complete_if_idle_locked(s)) return;
  fence_locked(s);
}

bool pool_state::poll_stream_locked(pool_stream& s) {
  std::uint64_t completed = s.completed;
  while (!s.fences.empty() && backend_.query_event(s.fences.front().event)) {
    completed = s.fences.front().epoch;
    spare_events_.push_back(s.fences.front().event);
    s.fences.pop_front();
    ++events_completed_;
  }
  if (completed == s.completed) return false;
  std::size_t const before = free_.bytes();
  release_owner_locked(s, completed);
  return free_.bytes() != before;
}

bool pool_state::poll_locked() {
  bool released = false;
  for (auto& entry : streams_)
    if (!entry.second->fences.empty()) released |= poll_stream_locked(*entry.second);
  return released;
}

void pool_state::release_owner_locked(pool_stream& s, std::uint64_t upto) {
  std::lock_guard<std::mutex> arena(s.mutex);
  s.completed = std::max(s.completed, std::min(upto, s.epoch));
  auto& owned = s.extents.extents();
  for (auto it = owned.begin(); it != owned.end();) {
    if (it->second.epoch > upto) {
      ++it;
      continue;
    }
    try {
      // Same chunk, so it is inside one; no overlap with free extents unless the pool is corrupt.
      add_extent(free_, it->first, it->second.size, 0, it->second.chunk);
    } catch (std::exception const& e) {
      log(log_level::error, name() + ": could not free " + hex(it->first) + ": " + e.what());
      ++it;
      continue;
    }
    it = s.extents.erase(it);
  }
  // Unfenced bytes are among those the stream still owns.
  s.unfenced_bytes = std::min(s.unfenced_bytes, s.extents.bytes());
}

void pool_state::drain_class_lists_locked(pool_stream& s, bool cold_only) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> arena(s.mutex);
  drain_class_lists_held(s, cold_only);
}

void pool_state::drain_class_lists_held(pool_stream& s, bool cold_only) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return;
  if (cold_only) ++s.misses;
  std::shared_lock<std::shared_mutex> chunks(chunks_mutex_);
  for (unsigned c = 0; c < num_classes_; ++c) {
    if (cold_only && s.class_used[c] + 1 >= s.misses) continue;
    auto& list = s.class_lists[c];
    std::size_t const size = pool_class_size(c);
    while (!list.empty()) {
      give_back_held(list.back(), size, s);
      list.pop_back();
      s.remove_listed(size);
    }
  }
}

void pool_state::give_back_held(void* ptr, std::size_t size, pool_stream& s) noexcept {
  auto const addr = reinterpret_cast<std::uintptr_t>(ptr);
  try {
    // Not covered by any fence recorded before: it takes the current epoch.
    if (add_extent(s.extents, addr, size, s.epoch, chunk_of(addr))) s.unfenced_bytes += size;
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": could not take back " + hex(addr) + ": " + e.what());
  }
}

// --- extents -------------------------------------------------------------------------------------

pool_chunk* pool_state::chunk_of(std::uintptr_t addr) noexcept {
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return nullptr;
  --it;
  return addr < it->second.base + it->second.size ? &it->second : nullptr;
}

bool pool_state::add_extent(pool_extent_set& set, std::uintptr_t addr, std::size_t size,
                            std::uint64_t epoch, pool_chunk* chunk) {
  switch (set.insert(addr, size, epoch, chunk)) {
    case pool_extent_set::insert_result::inserted:
      return true;
    case pool_extent_set::insert_result::outside_chunk:
      log(log_level::error, name() + ": " + hex(addr) + " (" + std::to_string(size) +
                                " B) is not inside a chunk of this pool; ignored");
      return false;
    case pool_extent_set::insert_result::overlaps:
      break;
  }
  log_overlap(addr, size);
  return false;
}

void pool_state::log_overlap(std::uintptr_t addr, std::size_t size) const {
  log(log_level::error, name() + ": " + hex(addr) + " (" + std::to_string(size) +
                            " B) overlaps free memory (double free or wrong size); ignored");
}

std::uintptr_t pool_state::best_fit_locked(std::size_t size, pool_stream& s) {
  std::lock_guard<std::mutex> arena(s.mutex);
  auto const own = s.extents.best_fit(size);
  auto const any = free_.best_fit(size);
  bool const has_own = own != s.extents.extents().end();
  bool const has_any = any != free_.extents().end();
  if (has_own && (!has_any || own->second.size <= any->second.size))
    return s.extents.take(own, size);
  if (has_any) return free_.take(any, size);
  return 0;
}

// The slow path for one block, with mutex_ held, cheapest and least disruptive first (own_tried:
// the calling thread has just tried the stream's extents and lists under its lock alone):
//   1. memory the calling stream may use at once: its extents and the free ones, a free extent
//      that merged with its own holds the request, its cold class lists (lists it has not used
//      since its previous miss: merging the lists in use would only make it carve them again),
//      extents of any stream whose fences have completed. The stream's own extents stay its own
//      even when it is idle: released to the free ones, they would come back only one slab at a
//      time, each under the mutex;
//   2. (a pool that keeps missing grows instead of merging again: pool_thrash_misses)
//      all of the calling thread's caches and stream's lists;
//   3. the parked blocks (class lists and extents) of quiet streams, those that have not
//      allocated since the pool last grew, when they are at least half of what the pool holds,
//      at most once per growth. Taking the blocks of a stream that is still allocating only
//      moves the miss to it (and every thread that needs the mutex waits while its lists are
//      walked): the pool grows instead and each stream keeps what it uses (what a per-stream
//      pool holds), while a stream that only frees what another allocates (producer and
//      consumer) is still drained long before the pool doubles;
//   4. growth (the upstream's call without the mutex), after giving back chunks too small for the
//      request: chunk_size for each stream that came short (past step 1's first fit) since the
//      last growth, up to the pool's share per stream (growth_step_locked), so that the next
//      misses of streams running short together need no upstream call of their own;
//   5. under pressure (growth failed): every stream reclaimed, a device synchronisation, a trim.
void* pool_state::obtain(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream& s,
                         bool own_tried) {
  // The mutex may be released below (growth, trim): `s` must outlive that even if it is retired.
  struct pin {
    pool_stream& s;
    explicit pin(pool_stream& stream) : s(stream) { ++s.pins; }
    ~pin() { --s.pins; }  // the mutex is held again whenever obtain returns or throws
  } const pinned(s);
  if (void* p = fit_locked(size, s)) return p;
  s.short_at_growth = upstream_allocations_;  // counted by the next growth's step
  // Free extents next to the stream's own merge with them: a fit may straddle the two.
  if (adopt_for_fit_locked(s, size))
    if (void* p = fit_locked(size, s)) return p;
  if (!own_tried && s.class_list_bytes.load(std::memory_order_relaxed) > 0) {
    drain_class_lists_locked(s, /*cold_only=*/true);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (poll_locked())
    if (void* p = fit_locked(size, s)) return p;
  // A pool that keeps missing here is too tight for the workload: merging everything back and
  // carving it up again on every miss costs far more than one more chunk.
  if (misses_since_growth_ >= pool_thrash_misses) {
    if (options_.trim_before_growth) trim_unlocked(lock, fenceable(s) ? &s : nullptr);
    if (grow(lock, size)) {
      reset_full_drains(s);
      if (void* p = fit_locked(size, s)) return p;
    }
  }
  ++misses_since_growth_;
  flush_calling_thread_locked();
  drain_class_lists_locked(s);
  adopt_for_fit_locked(s, size);
  poll_locked();
  if (void* p = fit_locked(size, s)) return p;
  std::size_t const parked = reclaims_since_growth_ == 0 ? parked_by_quiet_others_locked(s) : 0;
  if (parked > 0 && parked >= held_ / 2)
    if (void* p = reclaim_other_streams_locked(size, s, /*quiet_only=*/true)) return p;
  // Completely free chunks, and chunks wholly freed on the calling stream, are too small for this
  // request (or it would fit): give them back before growing, so that what the pool holds follows
  // the shape of the workload, not its history.
  if (options_.trim_before_growth) trim_unlocked(lock, fenceable(s) ? &s : nullptr);
  if (grow(lock, size)) {
    reset_full_drains(s);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (void* p = reclaim_other_streams_locked(size, s, /*quiet_only=*/false)) return p;
  // Last resort: other threads flush at their next call; wait for every stream so that every
  // extent handed back so far is free for all.
  flush_request_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<pool_stream*, std::uint64_t>> cuts;
  cuts.reserve(streams_.size());
  for (auto& entry : streams_)
    cuts.emplace_back(entry.second.get(), cut_epoch_locked(*entry.second));
  scoped_device const on_device(backend_, device_);
  backend_.synchronize();
  ++synchronizations_;
  for (auto const& [stream, upto] : cuts)
    complete_all_fences_locked(*stream, upto);
  if (void* p = fit_locked(size, s)) return p;
  if (trim_locked() > 0 && grow(lock, size))
    if (void* p = fit_locked(size, s)) return p;
  throw_out_of_memory_locked(size);
}

std::size_t pool_state::parked_by_quiet_others_locked(pool_stream const& s) const noexcept {
  std::size_t parked = 0;
  for (auto const& entry : streams_) {
    pool_stream const& other = *entry.second;
    if (&other != &s && quiet(other))
      parked += other.extents.bytes() + other.class_list_bytes.load();
  }
  return parked;
}

void* pool_state::reclaim_other_streams_locked(std::size_t size, pool_stream& s, bool quiet_only) {
  ++reclaims_;
  ++reclaims_since_growth_;
  for (auto& entry : streams_)
    if (entry.second.get() != &s && (!quiet_only || quiet(*entry.second)))
      settle_locked(*entry.second);
  poll_locked();
  return fit_locked(size, s);
}

void pool_state::reset_full_drains(pool_stream& s) noexcept {
  std::lock_guard<std::mutex> arena(s.mutex);
  s.full_drains = 0;
}

bool pool_state::adopt_for_fit_locked(pool_stream& s, std::size_t size) {
  std::lock_guard<std::mutex> arena(s.mutex);
  if (s.extents.empty() || free_.empty()) return false;
  auto const& own = s.extents.extents();
  for (auto it = free_.extents().begin(); it != free_.extents().end(); ++it) {
    std::uintptr_t const addr = it->first;
    pool_extent const e = it->second;
    std::size_t merged = e.size;
    auto const next = own.lower_bound(addr);
    if (next != own.end() && next->first == addr + e.size && next->second.chunk == e.chunk)
      merged += next->second.size;
    if (next != own.begin()) {
      auto const prev = std::prev(next);
      if (prev->first + prev->second.size == addr && prev->second.chunk == e.chunk)
        merged += prev->second.size;
    }
    if (merged == e.size || merged < size) continue;
    // Merging with a neighbour reuses its nodes: once the erase is done the insert cannot fail.
    free_.erase(it);
    if (add_extent(s.extents, addr, e.size, s.epoch, e.chunk)) s.unfenced_bytes += e.size;
    return true;
  }
  return false;
}

bool pool_state::overlaps_extent_locked(std::uintptr_t addr, std::size_t size) {
  auto overlaps = [&](pool_extent_set const& set) {
    auto const& extents = set.extents();
    auto next = extents.lower_bound(addr);
    if (next != extents.end() && next->first < addr + size) return true;
    return next != extents.begin() && std::prev(next)->first + std::prev(next)->second.size > addr;
  };
  bool found = overlaps(free_);
  for (auto it = streams_.begin(); !found && it != streams_.end(); ++it) {
    std::lock_guard<std::mutex> arena(it->second->mutex);
    found = overlaps(it->second->extents);
  }
  if (found) log_overlap(addr, size);
  return found;
}

void pool_state::give_back_locked(void* ptr, std::size_t size, pool_stream& s) noexcept {
  std::lock_guard<std::mutex> arena(s.mutex);
  give_back_held(ptr, size, s);
}

void pool_state::after_give_back_locked(pool_stream& s, std::size_t threshold) noexcept {
  // With a single stream nobody waits for a fence; with several, one event per fence_bytes freed.
  // Only this stream's fences are polled here: walking every stream on each batch is what made
  // threads on separate streams serialise; the slow path polls them all when someone runs short.
  if (streams_.size() < 2 || !fenceable(s)) return;
  {
    std::lock_guard<std::mutex> arena(s.mutex);
    if (s.unfenced_bytes < threshold) return;
  }
  try {
    fence_locked(s);
    poll_stream_locked(s);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": fence failed: " + e.what());
  }
}

}  // namespace gpumem::detail
