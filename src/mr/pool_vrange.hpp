// The virtual address range of an expandable pool (pool_options::expandable), private to
// src/mr/pool_*.cpp: reserved once, and backed page by page (pool_options::page_size, a multiple of
// the backend's granularity) with physical memory of its own per page, so that the pool can give
// back the memory under a free part in the middle of the range and map it where a block needs it
// (pool_range.cpp).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::detail {

// Not thread safe: pool_state guards it with vrange_mutex_. mapped() may be read without it as a
// hint. Offsets and sizes are bytes from base(), multiples of page().
class pool_vrange {
 public:
  // Reserves `capacity` bytes, in pages of `page_size` bytes (both rounded up: the page to the
  // backend's granularity, the range to whole pages). Throws not_supported when the backend has no
  // virtual memory management.
  pool_vrange(device_backend& backend, std::size_t capacity, std::size_t page_size);
  ~pool_vrange();  // unmaps and releases every page, then the range
  pool_vrange(pool_vrange const&) = delete;
  pool_vrange& operator=(pool_vrange const&) = delete;

  std::uintptr_t base() const noexcept { return reinterpret_cast<std::uintptr_t>(base_); }
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t page() const noexcept { return page_; }
  // Bytes of the range backed by physical memory.
  std::size_t mapped() const noexcept { return mapped_.load(std::memory_order_relaxed); }
  bool is_mapped(std::size_t offset) const noexcept {
    return pages_[offset / page_] != physical_handle::none;
  }

  // Maps every page of [offset, offset + bytes), none of which is mapped: with the physical pages
  // that unmap() left first, then new ones. All or nothing: on an error (out_of_memory when the
  // device has no memory for a new page) the pages it mapped are unmapped again and it rethrows.
  // Returns how many pages it had to create.
  std::size_t map(std::size_t offset, std::size_t bytes);
  // Unmaps the pages of [offset, offset + bytes), every one mapped, keeping their physical memory
  // for the next map(). Stops at the first page the backend fails to unmap (logged): returns the
  // bytes unmapped from `offset` on.
  std::size_t unmap(std::size_t offset, std::size_t bytes) noexcept;
  // Releases the physical memory that unmap() kept and map() did not take; returns its bytes.
  std::size_t release_spares() noexcept;

 private:
  device_backend& backend_;
  std::size_t page_;
  std::size_t capacity_ = 0;
  void* base_ = nullptr;
  std::atomic<std::size_t> mapped_{0};
  std::vector<physical_handle> pages_;   // per page of the range; none: not mapped
  std::vector<physical_handle> spares_;  // unmapped, not yet released
};

}  // namespace gpumem::detail
