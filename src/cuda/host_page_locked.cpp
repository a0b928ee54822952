// The host backend's pinned and registered host memory (see host_page_locked.hpp).
#include "host_page_locked.hpp"

#include "host_errors.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace gpumem::detail::host {

page_locked_memory::~page_locked_memory() {
  for (auto& entry : pinned_)
    std::free(entry.first);
}

std::size_t page_locked_memory::page_size() noexcept {
  static std::size_t const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

void* page_locked_memory::allocate_pinned(std::size_t bytes, host_alloc_flags flags) {
  // Whole pages, as cudaHostAlloc; a size whose
  // round-up would wrap (to 0 bytes: a block smaller than the request) or that no allocation
  // may have is out of memory.
  std::size_t const page = page_size();
  std::size_t rounded = 0;
  if (bytes > max_allocation_bytes ||
      !round_up_checked(std::max<std::size_t>(bytes, 1), page, rounded))
    throw out_of_memory(bytes, "host backend (pinned host memory)", 0, 0,
                        "cannot allocate " + std::to_string(bytes) +
                            " bytes: above the largest allocation gpumem serves");
  void* p = std::aligned_alloc(page, rounded);
  if (p == nullptr)
    throw out_of_memory(bytes, "host backend (pinned host memory)", 0, 0, "aligned_alloc failed");
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_[p] = host_range{bytes, flags.mapped};
  return p;
}

void page_locked_memory::deallocate_pinned(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pinned_.find(ptr);
    if (it == pinned_.end())
      fail(invalid_value, "cudaErrorInvalidValue", "deallocate_pinned",
           pointer_text(ptr) + " is not pinned memory allocated by this backend");
    pinned_.erase(it);
  }
  std::free(ptr);
}

void page_locked_memory::check_range(void* ptr, std::size_t bytes) {
  if (ptr == nullptr || bytes == 0)
    fail(invalid_value, "cudaErrorInvalidValue", "register_host",
         "null pointer or zero size (" + pointer_text(ptr) + ", " + std::to_string(bytes) + ")");
  std::size_t end = 0;
  if (bytes > max_allocation_bytes ||
      !checked_add(reinterpret_cast<std::uintptr_t>(ptr), bytes, end))
    fail(invalid_value, "cudaErrorInvalidValue", "register_host",
         "the range of " + std::to_string(bytes) + " bytes at " + pointer_text(ptr) +
             " wraps the address space");
  // CUDA registers only memory the process has mapped. msync fails with ENOMEM when a page of the
  // range is not mapped (MS_ASYNC writes nothing back; it walks the mappings, not the pages).
  auto const page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::uintptr_t const first = reinterpret_cast<std::uintptr_t>(ptr) / page * page;
  if (::msync(reinterpret_cast<void*>(first), end - first, MS_ASYNC) != 0 && errno == ENOMEM)
    fail(invalid_value, "cudaErrorInvalidValue", "register_host",
         "the range of " + std::to_string(bytes) + " bytes at " + pointer_text(ptr) +
             " is not all mapped host memory");
}

void page_locked_memory::register_host(void* ptr, std::size_t bytes, bool mapped) {
  check_range(ptr, bytes);  // overlaps() needs a range that does not wrap
  std::lock_guard<std::mutex> lock(mutex_);
  if (overlaps(pinned_, ptr, bytes))
    fail(invalid_value, "cudaErrorInvalidValue", "register_host",
         "the range of " + std::to_string(bytes) + " bytes at " + pointer_text(ptr) +
             " overlaps pinned memory of allocate_pinned");
  if (overlaps(registered_, ptr, bytes))
    fail(host_memory_registered, "cudaErrorHostMemoryAlreadyRegistered", "register_host",
         "the range of " + std::to_string(bytes) + " bytes at " + pointer_text(ptr) +
             " overlaps a registered range");
  registered_[ptr] = host_range{bytes, mapped};
}

void page_locked_memory::unregister_host(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (registered_.erase(ptr) == 0)
    fail(host_memory_not_registered, "cudaErrorHostMemoryNotRegistered", "unregister_host",
         pointer_text(ptr) + " is not registered");
}

void* page_locked_memory::mapped_device_pointer(void* host_ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  host_range const* range = find(host_ptr);
  if (range == nullptr || !range->mapped)
    fail(invalid_value, "cudaErrorInvalidValue", "mapped_device_pointer",
         pointer_text(host_ptr) + " is not mapped host memory");
  return host_ptr;  // unified addressing: the device sees the host address
}

bool page_locked_memory::overlaps(table const& ranges, void* ptr, std::size_t bytes) {
  auto const start = reinterpret_cast<std::uintptr_t>(ptr);
  std::uintptr_t const last = start + std::max<std::size_t>(bytes, 1) - 1;  // no wrap: checked
  // The last range that starts at or before `last`: if it does not reach `start`, no range
  // before it does (they do not overlap one another).
  auto it = ranges.upper_bound(reinterpret_cast<void*>(last));
  if (it == ranges.begin()) return false;
  --it;
  std::uintptr_t const other_last =
      reinterpret_cast<std::uintptr_t>(it->first) + std::max<std::size_t>(it->second.size, 1) - 1;
  return other_last >= start;
}

page_locked_memory::host_range const* page_locked_memory::find(void const* ptr) const {
  auto const p = reinterpret_cast<std::uintptr_t>(ptr);
  for (auto const* ranges : {&pinned_, &registered_}) {
    auto it = ranges->upper_bound(const_cast<void*>(ptr));
    if (it == ranges->begin()) continue;
    --it;
    auto const start = reinterpret_cast<std::uintptr_t>(it->first);
    if (p >= start && p - start < std::max<std::size_t>(it->second.size, 1)) return &it->second;
  }
  return nullptr;
}

}  // namespace gpumem::detail::host
