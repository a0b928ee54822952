// The back end of pool_resource: chunks from the upstream, the coalescing best fit over free
// extents, per-stream ownership with batched fences, growth, trim and out-of-memory.
// Every function named *_locked runs with mutex_ held.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
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
      num_classes_(0),
      id_(next_pool_id.fetch_add(1)) {
  GPUMEM_EXPECTS(options.max_cached_size <= 4 * GiB, "pool_options::max_cached_size " +
                                                         format_bytes(options.max_cached_size) +
                                                         " is above the 4 GiB limit");
  GPUMEM_EXPECTS(options.chunk_size > 0, "pool_options::chunk_size must not be 0");
  GPUMEM_EXPECTS(options.initial_size <= options.maximum_size,
                 "pool_options::initial_size " + format_bytes(options.initial_size) +
                     " exceeds maximum_size " + format_bytes(options.maximum_size));
  num_classes_ = options.max_cached_size >= pool_granularity
                     ? pool_size_class(options.max_cached_size) + 1
                     : 0;
  // Cached sizes must be exactly the class sizes up to the limit.
  if (num_classes_ > 0) options_.max_cached_size = pool_class_size(num_classes_ - 1);
  if (backend_.kind() == backend_kind::cuda) {
    per_thread_handle_ = backend_.per_thread_default_stream();
    has_per_thread_handle_ = true;
  }
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
  {
    std::lock_guard<std::mutex> registry(pool_registry_mutex());
    for (auto& cache : caches_)
      cache->pool.store(nullptr);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  bool pending = false;
  for (auto& entry : streams_)
    pending |= !entry.second->fences.empty() || entry.second->owned_bytes > 0 ||
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
}

std::string pool_state::name() const {
  return "pool_resource over " + upstream_.name();
}

// --- streams -------------------------------------------------------------------------------------

pool_stream& pool_state::stream_locked(stream_handle handle) {
  bool const per_thread =
      has_per_thread_handle_ && handle != nullptr && handle == per_thread_handle_;
  auto const key =
      std::make_pair(handle, per_thread ? std::this_thread::get_id() : std::thread::id());
  auto it = streams_.find(key);
  if (it != streams_.end()) return *it->second;
  auto s = std::make_unique<pool_stream>();
  s->handle = handle;
  s->thread = key.second;
  s->per_thread = per_thread;
  s->class_lists.resize(num_classes_);
  s->class_used.resize(num_classes_);
  return *streams_.emplace(key, std::move(s)).first->second;
}

bool pool_state::fenceable(pool_stream const& s) const noexcept {
  // The per-thread default stream names the caller's own stream: only its thread may record on it.
  return !s.per_thread || s.thread == std::this_thread::get_id();
}

event_handle pool_state::take_event_locked() {
  if (!spare_events_.empty()) {
    event_handle e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  return backend_.create_event(false);
}

// Covers the stream's extents handed back so far. Its class lists stay private to it (blocks
// drained from them later take the then-current epoch, so a fence never covers a block that was
// still listed when it was recorded): fencing is one event record, never a walk over the lists.
void pool_state::fence_locked(pool_stream& s) {
  if (s.unfenced_bytes == 0 || !fenceable(s)) return;
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
  ++events_recorded_;
}

void pool_state::complete_all_fences_locked(pool_stream& s) {
  for (auto& fence : s.fences)
    spare_events_.push_back(fence.event);
  events_completed_ += s.fences.size();
  s.fences.clear();
  s.unfenced_bytes = 0;
  release_owner_locked(s, std::numeric_limits<std::uint64_t>::max());
  ++s.epoch;
}

void pool_state::settle_locked(pool_stream& s) {
  drain_class_lists_locked(s);
  if (s.owned_bytes == 0 && s.fences.empty()) return;
  if (!fenceable(s)) return;
  // An idle stream has finished everything queued before every free handed back so far: no
  // event is needed for them.
  if (backend_.query_stream(s.handle)) {
    complete_all_fences_locked(s);
    return;
  }
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
  std::size_t const before = free_bytes_;
  release_owner_locked(s, completed);
  return free_bytes_ != before;
}

bool pool_state::poll_locked() {
  bool released = false;
  for (auto& entry : streams_)
    if (!entry.second->fences.empty()) released |= poll_stream_locked(*entry.second);
  return released;
}

void pool_state::release_owner_locked(pool_stream& s, std::uint64_t upto) {
  s.completed = std::max(s.completed, std::min(upto, s.epoch));
  std::vector<std::uintptr_t> ready;
  for (auto const& key : s.by_size) {
    auto it = extents_.find(key.second);
    if (it->second.epoch <= upto) ready.push_back(key.second);
  }
  for (std::uintptr_t addr : ready) {
    auto it = extents_.find(addr);
    pool_extent const e = it->second;
    erase_extent_locked(it);
    insert_extent_locked(addr, e.size, nullptr, 0, e.chunk);
  }
}

void pool_state::drain_class_lists_locked(pool_stream& s, bool cold_only) {
  if (s.class_list_bytes.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lists(s.lists_mutex);
  for (unsigned c = 0; c < num_classes_; ++c) {
    if (cold_only && s.class_used[c] >= s.misses) continue;
    auto& list = s.class_lists[c];
    std::size_t const size = pool_class_size(c);
    while (!list.empty()) {
      auto const addr = reinterpret_cast<std::uintptr_t>(list.back());
      if (insert_extent_locked(addr, size, &s, s.epoch, chunk_of_locked(addr)))
        s.unfenced_bytes += size;  // not covered by any fence recorded while it was listed
      list.pop_back();
      s.remove_listed(size);
    }
  }
  if (cold_only) ++s.misses;
}

// --- extents -------------------------------------------------------------------------------------

pool_chunk* pool_state::chunk_of_locked(std::uintptr_t addr) noexcept {
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return nullptr;
  --it;
  return addr < it->second.base + it->second.size ? &it->second : nullptr;
}

bool pool_state::insert_extent_locked(std::uintptr_t addr, std::size_t size, pool_stream* owner,
                                      std::uint64_t epoch, pool_chunk* chunk) {
  if (chunk == nullptr || addr + size > chunk->base + chunk->size) {
    log(log_level::error, name() + ": " + hex(addr) + " (" + std::to_string(size) +
                              " B) is not inside a chunk of this pool; ignored");
    return false;
  }
  auto next = extents_.lower_bound(addr);
  auto prev = next == extents_.begin() ? extents_.end() : std::prev(next);
  if ((next != extents_.end() && next->first < addr + size) ||
      (prev != extents_.end() && prev->first + prev->second.size > addr)) {
    log(log_level::error, name() + ": " + hex(addr) + " (" + std::to_string(size) +
                              " B) overlaps free memory (double free or wrong size); ignored");
    return false;
  }
  chunk->free_bytes += size;
  if (owner != nullptr)
    owner->owned_bytes += size;
  else
    free_bytes_ += size;
  std::uintptr_t start = addr;
  std::size_t total = size;
  if (prev != extents_.end() && prev->first + prev->second.size == addr &&
      prev->second.chunk == chunk && prev->second.owner == owner) {
    index_of(owner).erase({prev->second.size, prev->first});
    start = prev->first;
    total += prev->second.size;
    epoch = std::max(epoch, prev->second.epoch);
    extents_.erase(prev);
  }
  if (next != extents_.end() && next->first == addr + size && next->second.chunk == chunk &&
      next->second.owner == owner) {
    index_of(owner).erase({next->second.size, next->first});
    total += next->second.size;
    epoch = std::max(epoch, next->second.epoch);
    next = extents_.erase(next);
  }
  extents_.emplace_hint(next, start, pool_extent{total, owner, epoch, chunk});
  index_of(owner).emplace(total, start);
  return true;
}

void pool_state::erase_extent_locked(extent_map::iterator it) {
  pool_extent const& e = it->second;
  index_of(e.owner).erase({e.size, it->first});
  e.chunk->free_bytes -= e.size;
  if (e.owner != nullptr)
    e.owner->owned_bytes -= e.size;
  else
    free_bytes_ -= e.size;
  extents_.erase(it);
}

std::uintptr_t pool_state::best_fit_locked(std::size_t size, pool_stream& s) {
  auto own = s.by_size.lower_bound({size, 0});
  auto any = free_by_size_.lower_bound({size, 0});
  std::uintptr_t addr = 0;
  if (own != s.by_size.end() && (any == free_by_size_.end() || own->first <= any->first))
    addr = own->second;
  else if (any != free_by_size_.end())
    addr = any->second;
  else
    return 0;
  auto it = extents_.find(addr);
  pool_extent const e = it->second;
  erase_extent_locked(it);
  if (e.size > size) {
    // The rest keeps its owner and epoch; its neighbours were not mergeable before, nor now.
    std::uintptr_t const rest = addr + size;
    extents_.emplace(rest, pool_extent{e.size - size, e.owner, e.epoch, e.chunk});
    index_of(e.owner).emplace(e.size - size, rest);
    e.chunk->free_bytes += e.size - size;
    if (e.owner != nullptr)
      e.owner->owned_bytes += e.size - size;
    else
      free_bytes_ += e.size - size;
  }
  return addr;
}

// The slow path for one block, cheapest and least disruptive first:
//   1. memory the calling stream may use at once: its extents and the free ones, its extents
//      released if it is idle, its cold class lists merged back (lists it has not used since its
//      previous miss: merging the lists in use would only make it carve them again), extents of
//      any stream whose fences have completed;
//   2. (a pool that keeps missing grows instead of merging again: pool_thrash_misses)
//      all of the calling thread's caches and stream's lists, and the stream's work if it is idle;
//   3. other streams' parked blocks (class lists and extents), when they are at least half of
//      what the pool holds, at most once per growth: reclaiming walks every other stream's lists
//      into extents under the mutex (every thread that needs it waits meanwhile) and leaves those
//      streams to refill by carving. Done on every miss, it made threads on separate streams
//      serialise; skipped while others park little, the pool grows instead and each stream keeps
//      what it uses (what a per-stream pool holds), while a stream that only frees what another
//      allocates (producer and consumer) is still drained long before the pool doubles;
//   4. growth (the upstream's call without the mutex), after giving back chunks too small for the
//      request;
//   5. under pressure (growth failed): every stream reclaimed, a device synchronisation, a trim.
void* pool_state::obtain(std::unique_lock<std::mutex>& lock, std::size_t size, pool_stream& s) {
  if (void* p = fit_locked(size, s)) return p;
  // An idle stream's extents are free for all: released, they merge with free neighbours. One
  // stream query, and the class lists stay as they are.
  if ((s.owned_bytes > 0 || !s.fences.empty()) && fenceable(s) && backend_.query_stream(s.handle)) {
    complete_all_fences_locked(s);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (s.class_list_bytes.load(std::memory_order_relaxed) > 0) {
    drain_class_lists_locked(s, /*cold_only=*/true);
    if (void* p = fit_locked(size, s)) return p;
  }
  if (poll_locked())
    if (void* p = fit_locked(size, s)) return p;
  // A pool that keeps missing here is too tight for the workload: merging everything back and
  // carving it up again on every miss costs far more than one more chunk.
  if (misses_since_growth_ >= pool_thrash_misses) {
    if (options_.trim_before_growth) trim_locked(fenceable(s) ? &s : nullptr, false);
    if (grow(lock, size))
      if (void* p = fit_locked(size, s)) return p;
  }
  ++misses_since_growth_;
  flush_calling_thread_locked();
  drain_class_lists_locked(s);
  settle_locked(s);
  poll_locked();
  if (void* p = fit_locked(size, s)) return p;
  bool reclaimed = false;
  if (reclaims_since_growth_ == 0 && parked_by_others_locked(s) >= held_ / 2) {
    reclaimed = true;
    if (void* p = reclaim_other_streams_locked(size, s)) return p;
  }
  // Completely free chunks, and chunks wholly freed on the calling stream, are too small for this
  // request (or it would fit): give them back before growing, so that what the pool holds follows
  // the shape of the workload, not its history.
  if (options_.trim_before_growth) trim_locked(fenceable(s) ? &s : nullptr, false);
  if (grow(lock, size))
    if (void* p = fit_locked(size, s)) return p;
  if (!reclaimed)
    if (void* p = reclaim_other_streams_locked(size, s)) return p;
  // Last resort: other threads flush at their next call; wait for every stream so that every
  // extent handed back so far is free for all.
  flush_request_.fetch_add(1, std::memory_order_relaxed);
  backend_.synchronize();
  ++synchronizations_;
  for (auto& entry : streams_)
    complete_all_fences_locked(*entry.second);
  if (void* p = fit_locked(size, s)) return p;
  if (trim_locked() > 0 && grow(lock, size))
    if (void* p = fit_locked(size, s)) return p;
  throw_out_of_memory_locked(size);
}

std::size_t pool_state::parked_by_others_locked(pool_stream const& s) const noexcept {
  std::size_t parked = 0;
  for (auto const& entry : streams_)
    if (entry.second.get() != &s)
      parked += entry.second->owned_bytes + entry.second->class_list_bytes.load();
  return parked;
}

void* pool_state::reclaim_other_streams_locked(std::size_t size, pool_stream& s) {
  ++reclaims_;
  ++reclaims_since_growth_;
  for (auto& entry : streams_)
    if (entry.second.get() != &s) {
      drain_class_lists_locked(*entry.second);
      settle_locked(*entry.second);
    }
  poll_locked();
  return fit_locked(size, s);
}

void pool_state::give_back_locked(void* ptr, std::size_t size, pool_stream& s) noexcept {
  auto const addr = reinterpret_cast<std::uintptr_t>(ptr);
  try {
    if (insert_extent_locked(addr, size, &s, s.epoch, chunk_of_locked(addr)))
      s.unfenced_bytes += size;
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": could not take back " + hex(addr) + ": " + e.what());
  }
}

void pool_state::after_give_back_locked(pool_stream& s) noexcept {
  // With a single stream nobody waits for a fence; with several, one event per fence_bytes freed.
  // Only this stream's fences are polled here: walking every stream on each batch is what made
  // threads on separate streams serialise; the slow path polls them all when someone runs short.
  if (streams_.size() < 2 || s.unfenced_bytes < options_.fence_bytes || !fenceable(s)) return;
  try {
    fence_locked(s);
    poll_stream_locked(s);
  } catch (std::exception const& e) {
    log(log_level::warn, name() + ": fence failed: " + e.what());
  }
}

}  // namespace gpumem::detail
