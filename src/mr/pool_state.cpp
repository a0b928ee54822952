// The back end of pool_resource: construction, close and destruction, and adding ranges to the
// coalescing extent sets. The best fit and the slow path for a block (obtain) are in
// pool_obtain.cpp, streams in pool_streams.cpp, fences in pool_fences.cpp, growth, trim and
// out-of-memory in pool_growth.cpp. Every function named *_locked runs with mutex_ held.
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
      first_merged_class_(0),
      id_(next_pool_id.fetch_add(1)),
      // Blocks above max_cached_size (at most 4 GiB, checked below) are large.
      large_blocks_(std::min<std::size_t>(options.max_cached_size, 4 * GiB) + 1) {
  GPUMEM_EXPECTS(options.max_cached_size <= 4 * GiB, "pool_options::max_cached_size " +
                                                         format_bytes(options.max_cached_size) +
                                                         " is above the 4 GiB limit");
  GPUMEM_EXPECTS(options.chunk_size > 0 && options.chunk_size <= max_allocation_bytes,
                 "pool_options::chunk_size " + std::to_string(options.chunk_size) +
                     " is not between 1 byte and " + format_bytes(max_allocation_bytes));
  GPUMEM_EXPECTS(options.held_target >= 1.0,  // NaN too
                 "pool_options::held_target " + std::to_string(options.held_target) +
                     " is below 1 (the pool holds at least what is live)");
  GPUMEM_EXPECTS(options.held_target_most >= 1.0,  // NaN too
                 "pool_options::held_target_most " + std::to_string(options.held_target_most) +
                     " is below 1 (the pool holds at least what is live)");
  GPUMEM_EXPECTS(options.page_size > 0 && options.page_size <= 1 * GiB,
                 "pool_options::page_size " + std::to_string(options.page_size) +
                     " is not between 1 byte and 1 GiB");
  GPUMEM_EXPECTS(options.initial_size <= options.maximum_size,
                 "pool_options::initial_size " + format_bytes(options.initial_size) +
                     " exceeds maximum_size " + format_bytes(options.maximum_size));
  num_classes_ = options.max_cached_size >= pool_granularity
                     ? pool_size_class(options.max_cached_size) + 1
                     : 0;
  // Cached sizes must be exactly the class sizes up to the limit; below the smallest class (256
  // bytes), nothing is cached.
  options_.max_cached_size = num_classes_ > 0 ? pool_class_size(num_classes_ - 1) : 0;
  // Every extent is a multiple of 256 bytes: so is the most the pool may hold.
  options_.maximum_size = options.maximum_size / pool_granularity * pool_granularity;
  first_merged_class_ = options_.max_cached_size >= pool_merged_class_bytes
                            ? pool_size_class(pool_merged_class_bytes)
                            : num_classes_;
  per_thread_handle_ = backend_.per_thread_default_stream();
  has_per_thread_handle_ = true;
  if (options.expandable) {
    std::size_t device = options.maximum_size;
    try {
      device = backend_.get_memory_info().total;
    } catch (std::exception const&) {
    }
    // Twice the memory the pool may hold: holes (pages given back in the middle of the range)
    // cost address space.
    std::size_t const most = std::min(device, options.maximum_size);
    vrange_ = std::make_unique<pool_vrange>(
        backend_, most > std::numeric_limits<std::size_t>::max() / 2 ? most : 2 * most,
        options.page_size);
  }
  // Within the maximum as rounded (an initial size of all of it, rounded up, would not fit).
  if (std::size_t const initial = std::min(options.initial_size, options_.maximum_size)) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!grow(lock, initial, nullptr))
      throw out_of_memory(options.initial_size, name(), 0, 0,
                          "the upstream could not provide the initial pool size");
  }
}

pool_state::~pool_state() {
  join_orphan_sync();
  if (is_closed()) {
    destroy_closed();
    return;
  }
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
  auto const live = static_cast<std::int64_t>(counts_.large_live) + counts_.retired_live + [&] {
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
      return_event_locked(fence.event);  // destroyed at once if it cannot be kept
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

// The destructor of a closed pool: close() left no event, stream or idle chunk, and no cache
// refers to the pool. The chunks left held live blocks at close().
void pool_state::destroy_closed() noexcept {
  std::size_t bytes = 0;
  for (auto const& entry : chunks_)
    bytes += entry.second.size;
  if (closed_.load(std::memory_order_relaxed) == closed_state::abandon) {
    // The device's context was reset after close(): its memory went with it. No device call; the
    // range's bookkeeping is leaked with it (unmapping would name the dead context's handles).
    if (bytes > 0)
      log(log_level::info, name() + ": " + format_bytes(bytes) + " in " +
                               std::to_string(chunks_.size()) +
                               " chunk(s) still in use at close() were left to the device "
                               "context's reset, not given back");
    (void)vrange_.release();
    return;
  }
  try {
    scoped_device const on_device(backend_, device_);
    for (auto& entry : chunks_)
      if (!entry.second.mapped)
        upstream_.deallocate(reinterpret_cast<void*>(entry.second.base), entry.second.size,
                             nullptr);
    vrange_.reset();
  } catch (std::exception const& e) {
    log(log_level::error,
        name() + ": giving back " + format_bytes(bytes) + " after close() failed: " + e.what());
  }
}

std::string pool_state::name() const {
  return "pool_resource over " + upstream_.name();
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
      log(log_level::error, name() + ": " + pool_hex(addr) + " (" + std::to_string(size) +
                                " B) is not inside a chunk of this pool; ignored");
      return false;
    case pool_extent_set::insert_result::overlaps:
      break;
  }
  log_overlap(addr, size);
  return false;
}

void pool_state::note_lost(std::uintptr_t addr, std::size_t size) noexcept {
  lost_bytes_.fetch_add(size, std::memory_order_relaxed);
  try {
    log(log_level::error, name() + ": out of host memory: " + pool_hex(addr) + " (" +
                              std::to_string(size) + " B) is lost until the pool is destroyed");
  } catch (...) {
    // the message itself needs the heap
  }
}

void pool_state::log_overlap(std::uintptr_t addr, std::size_t size) const {
  log(log_level::error, name() + ": " + pool_hex(addr) + " (" + std::to_string(size) +
                            " B) overlaps free memory (double free or wrong size); ignored");
}

bool pool_state::overlaps_extent_locked(std::uintptr_t addr, std::size_t size) {
  bool found = free_.overlaps(addr, size);
  for (auto it = streams_.begin(); !found && it != streams_.end(); ++it) {
    std::lock_guard<pool_lock> arena(it->second->mutex);
    found = it->second->extents.overlaps(addr, size);
  }
  if (found) {
    refuse_deallocation(addr, size);  // asked only of the block being freed
    log_overlap(addr, size);
  }
  return found;
}

}  // namespace gpumem::detail
