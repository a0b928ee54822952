// pool_vrange: an expandable pool's reserved range, backed page by page (see pool_vrange.hpp).
#include "pool_vrange.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>

#include <algorithm>
#include <string>

namespace gpumem::detail {

pool_vrange::pool_vrange(device_backend& backend, std::size_t capacity, std::size_t page_size)
    : backend_(backend), page_(backend.vmm_granularity()) {
  if (page_ == 0)
    throw not_supported("pool_resource: the " + std::string(to_string(backend.kind())) +
                        " backend has no virtual memory management (pool_options::expandable)");
  page_ *= std::max<std::size_t>(1, page_size / page_ + (page_size % page_ != 0 ? 1 : 0));
  std::size_t const pages = std::max<std::size_t>(capacity, 1) / page_ +
                            (std::max<std::size_t>(capacity, 1) % page_ != 0 ? 1 : 0);
  pages_.assign(pages, physical_handle::none);
  capacity_ = pages * page_;
  base_ = backend_.reserve_address_range(capacity_);
}

pool_vrange::~pool_vrange() {
  for (std::size_t page = 0; page < pages_.size(); ++page)
    if (pages_[page] != physical_handle::none) unmap(page * page_, page_);
  release_spares();
  try {
    backend_.release_address_range(base_, capacity_);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("pool_resource: releasing its range failed: ") + e.what());
  }
}

std::size_t pool_vrange::map(std::size_t offset, std::size_t bytes) {
  GPUMEM_EXPECTS(offset % page_ == 0 && bytes % page_ == 0 && bytes > 0 && offset <= capacity_ &&
                     bytes <= capacity_ - offset,
                 "pool_vrange::map(" + std::to_string(offset) + ", " + std::to_string(bytes) +
                     "): not whole pages of the range (" + std::to_string(capacity_) + " bytes)");
  std::size_t const first = offset / page_;
  std::size_t const count = bytes / page_;
  std::size_t created = 0;
  std::size_t done = 0;
  try {
    spares_.reserve(spares_.size() + count);  // so that undoing never allocates
    for (; done < count; ++done) {
      GPUMEM_EXPECTS(pages_[first + done] == physical_handle::none,
                     "pool_vrange::map: page " + std::to_string(first + done) + " is mapped");
      bool const fresh = spares_.empty();
      physical_handle const handle = fresh ? backend_.create_physical(page_) : spares_.back();
      try {
        backend_.map_physical(static_cast<char*>(base_) + (first + done) * page_, page_, handle);
      } catch (...) {
        if (fresh) backend_.release_physical(handle);
        throw;
      }
      if (fresh)
        ++created;
      else
        spares_.pop_back();
      pages_[first + done] = handle;
      mapped_.store(mapped() + page_, std::memory_order_relaxed);
    }
  } catch (...) {
    if (done > 0) unmap(offset, done * page_);  // their memory becomes spare
    throw;
  }
  return created;
}

std::size_t pool_vrange::unmap(std::size_t offset, std::size_t bytes) noexcept {
  std::size_t const first = offset / page_;
  std::size_t done = 0;
  for (; done < bytes / page_; ++done) {
    physical_handle const handle = pages_[first + done];
    try {
      spares_.reserve(spares_.size() + 1);
      backend_.unmap(static_cast<char*>(base_) + (first + done) * page_, page_);
    } catch (std::exception const& e) {
      // Kept mapped (and counted): the pool goes on without giving this page back.
      log(log_level::error,
          "pool_resource: unmapping " + format_bytes(page_) + " of its range failed: " + e.what());
      break;
    }
    spares_.push_back(handle);
    pages_[first + done] = physical_handle::none;
    mapped_.store(mapped() - page_, std::memory_order_relaxed);
  }
  return done * page_;
}

std::size_t pool_vrange::release_spares() noexcept {
  std::size_t released = 0;
  for (physical_handle const handle : spares_) {
    try {
      backend_.release_physical(handle);
    } catch (std::exception const& e) {
      log(log_level::error,
          std::string("pool_resource: releasing a page of its range failed: ") + e.what());
    }
    released += page_;
  }
  spares_.clear();
  return released;
}

}  // namespace gpumem::detail
