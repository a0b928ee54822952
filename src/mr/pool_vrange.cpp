// pool_resource's expandable mode: one reserved virtual range, used from its start as the pool's
// one chunk, with physical memory mapped page by page where blocks are (device_backend's
// virtual-memory calls). See pool_state.hpp for the locking.
//
// The invariant: every byte outside the free extents (a stream's extents, class lists, thread
// caches, live blocks) lies on mapped pages; only pages lying wholly inside free extents may be
// unmapped. So memory leaving the free extents is backed first (back_locked), and the fast paths,
// which work on a stream's own extents, never meet an unmapped page. When a page is needed, a page
// lying wholly in the free extents gives up its physical memory before a new one is made: holes
// between live blocks cost address space, not memory, and what the pool holds follows what is in
// use rather than every shape the workload has had.
#include "pool_state.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>

namespace gpumem::detail {

namespace {

// Address space taken into the chunk at a time: it costs no memory, and every growth of the
// chunk is a slow-path event.
constexpr std::size_t range_step = 256 * MiB;

}  // namespace

pool_vrange::pool_vrange(device_backend& backend, std::size_t capacity)
    : backend_(backend), page_(backend.vmm_granularity()), capacity_(0), base_(nullptr) {
  if (page_ == 0)
    throw not_supported("pool_resource: the " + std::string(to_string(backend.kind())) +
                        " backend has no virtual memory management (pool_options::expandable)");
  capacity_ = pool_round_up_to(std::max<std::size_t>(capacity, 1), page_);
  base_ = backend_.reserve_address_range(capacity_);
  try {
    pages_.resize(capacity_ / page_);
  } catch (...) {
    backend_.release_address_range(base_, capacity_);
    throw;
  }
}

pool_vrange::~pool_vrange() {
  for (std::size_t page = 0; page < pages_.size(); ++page)
    if (mapped(page)) {
      try {
        unmap(page);
      } catch (std::exception const& e) {
        log(log_level::error, std::string("pool_resource: unmapping a page failed: ") + e.what());
      }
    }
  release_spares(0);
  try {
    backend_.release_address_range(base_, capacity_);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("pool_resource: releasing its range failed: ") + e.what());
  }
}

void pool_vrange::map(std::size_t page) {
  GPUMEM_EXPECTS(page < pages_.size() && !mapped(page),
                 "pool_vrange::map(" + std::to_string(page) + "): not an unmapped page");
  bool const fresh = spare_.empty();
  physical_handle const handle = fresh ? backend_.create_physical(page_) : spare_.back();
  try {
    backend_.map_physical(static_cast<char*>(base_) + page * page_, page_, handle);
  } catch (...) {
    if (fresh) backend_.release_physical(handle);
    throw;
  }
  if (fresh)
    ++created_;
  else
    spare_.pop_back();
  pages_[page] = handle;
  ++mapped_;
  ++maps_;
}

void pool_vrange::unmap(std::size_t page) {
  GPUMEM_EXPECTS(page < pages_.size() && mapped(page),
                 "pool_vrange::unmap(" + std::to_string(page) + "): not a mapped page");
  spare_.reserve(spare_.size() + 1);
  backend_.unmap(static_cast<char*>(base_) + page * page_, page_);
  spare_.push_back(pages_[page]);
  pages_[page] = physical_handle{};
  --mapped_;
  ++unmaps_;
}

std::size_t pool_vrange::release_spares(std::size_t keep) noexcept {
  std::size_t released = 0;
  while (spare_.size() * page_ > keep) {
    try {
      backend_.release_physical(spare_.back());
    } catch (std::exception const& e) {
      log(log_level::error, std::string("pool_resource: releasing a page failed: ") + e.what());
    }
    spare_.pop_back();
    released += page_;
    ++released_;
  }
  return released;
}

// --- pool_state's side ---------------------------------------------------------------------------

bool pool_state::grow_range(std::size_t size) {
  std::size_t const page = vrange_->page_size();
  std::size_t const used = vrange_chunk_ == nullptr ? 0 : vrange_chunk_->size;
  std::size_t const room = vrange_->capacity() - used;
  std::size_t const need = pool_round_up_to(pool_round_up(size), page);
  if (need > room) return false;
  std::size_t const step = std::min(room, std::max(need, range_step));
  std::uintptr_t start = 0;
  {
    std::lock_guard<std::shared_mutex> chunks(chunks_mutex_);
    if (vrange_chunk_ == nullptr) {
      auto const base = vrange_->base();
      vrange_chunk_ = &chunks_.try_emplace(base).first->second;
      vrange_chunk_->base = base;
      vrange_chunk_->mapped = true;
    }
    start = vrange_chunk_->base + vrange_chunk_->size;
    vrange_chunk_->size += step;
  }
  // Merges with a free end: the request fits there now (no memory is taken until it is carved).
  add_extent(free_, start, step, 0, vrange_chunk_);
  return true;
}

void pool_state::back_locked(std::uintptr_t addr, std::size_t size, pool_stream* s) {
  std::size_t const page = vrange_->page_size();
  std::size_t const first = (addr - vrange_->base()) / page;
  std::size_t const last = (addr + size - 1 - vrange_->base()) / page;
  std::size_t missing = 0;
  std::size_t taken_unmapped = 0;  // bytes of the range on unmapped pages: out of the free extents
  for (std::size_t p = first; p <= last; ++p) {
    if (vrange_->mapped(p)) continue;
    ++missing;
    std::uintptr_t const start = std::max(addr, vrange_->base() + p * page);
    std::uintptr_t const end = std::min(addr + size, vrange_->base() + (p + 1) * page);
    taken_unmapped += end - start;
  }
  if (missing == 0) return;
  // free_mapped_locked() assumes every unmapped byte lies in the free extents: not those taken.
  auto free_mapped = [&] { return free_mapped_locked() + taken_unmapped; };
  // While free memory is at most an eighth of what the pool holds, new pages are made: moving
  // pages (an unmap and a map each) for every change of shape would cost far more than the slack.
  // Beyond that, physical memory comes from pages lying wholly in the free extents first; then,
  // when the calling stream parks more than the slack and is idle, the blocks parked in the calling
  // thread's caches and in the stream's lists and extents go to the free ones (nothing of its work
  // can still use them) and their pages count too; only then new memory.
  std::size_t const slack = held_ / 8;
  auto spare = [&] { return vrange_->spare_bytes() / page; };
  if (spare() < missing && free_mapped() > slack) unmap_free_pages_locked(missing - spare());
  if (spare() < missing && s != nullptr && fenceable(*s) &&
      s->extents.bytes() + s->class_list_bytes.load(std::memory_order_relaxed) > slack) {
    flush_calling_thread_locked();
    drain_class_lists_locked(*s);
    if (complete_if_idle_locked(*s) && free_mapped() > slack)
      unmap_free_pages_locked(missing - spare());
  }
  // New pages within the maximum size, checked before any is mapped.
  std::size_t const fresh = missing - std::min(missing, spare());
  if (held_ > options_.maximum_size || (options_.maximum_size - held_) / page < fresh)
    throw out_of_memory(
        size, name(), held_, peak_held_,
        "mapping " + std::to_string(fresh) + " more page(s) would pass the pool's maximum size");
  scoped_device const on_device(backend_, device_);
  for (std::size_t p = first; p <= last; ++p) {
    if (vrange_->mapped(p)) continue;
    bool const made = spare() == 0;
    vrange_->map(p);
    if (made) note_growth_locked(page);
  }
}

bool pool_state::back_taken_locked(std::uintptr_t addr, std::size_t size, pool_chunk* chunk,
                                   pool_stream* s) noexcept {
  if (vrange_ == nullptr || chunk != vrange_chunk_) return true;
  try {
    back_locked(addr, size, s);
    return true;
  } catch (std::exception const& e) {
    log(log_level::debug,
        name() + ": no memory for " + format_bytes(size) + " of its range: " + e.what());
  }
  try {
    add_extent(free_, addr, size, 0, chunk);
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": lost " + format_bytes(size) + " of its range: " + e.what());
  }
  return false;
}

std::size_t pool_state::unmap_free_pages_locked(std::size_t want) {
  if (vrange_chunk_ == nullptr || want == 0) return 0;
  std::size_t const page = vrange_->page_size();
  std::uintptr_t const base = vrange_->base();
  std::size_t unmapped = 0;
  scoped_device const on_device(backend_, device_);
  for (auto const& [addr, e] : free_.extents()) {
    if (e.chunk != vrange_chunk_ || e.size < page) continue;
    // The pages lying wholly inside [addr, addr + size).
    std::size_t const first = (addr - base + page - 1) / page;
    std::size_t const end = (addr + e.size - base) / page;
    for (std::size_t p = first; p < end; ++p) {
      if (!vrange_->mapped(p)) continue;
      vrange_->unmap(p);
      if (++unmapped == want) return unmapped;
    }
  }
  return unmapped;
}

std::size_t pool_state::release_range_locked() noexcept {
  if (vrange_ == nullptr) return 0;
  try {
    unmap_free_pages_locked(vrange_->pages());
  } catch (std::exception const& e) {
    log(log_level::error, name() + ": unmapping free pages failed: " + e.what());
  }
  std::size_t const released = vrange_->release_spares(0);
  held_ -= released;
  held_hint_.store(held_, std::memory_order_relaxed);
  upstream_deallocations_ += released / vrange_->page_size();
  return released;
}

}  // namespace gpumem::detail
