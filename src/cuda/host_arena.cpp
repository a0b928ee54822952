#include "host_arena.hpp"

#include "host_errors.hpp"

#include <gpumem/core/assert.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/units.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

namespace gpumem::detail::host {

host_arena::host_arena(std::size_t capacity, std::size_t alignment) : alignment_(alignment) {
  // Every resource promises blocks aligned to at least 256 bytes, as CUDA's allocations are; the
  // pool carves its blocks at multiples of 256 from the upstream's chunks.
  GPUMEM_EXPECTS(alignment >= 256 && (alignment & (alignment - 1)) == 0,
                 "host backend: alignment must be a power of two of at least 256 bytes, got " +
                     std::to_string(alignment));
  std::size_t const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (capacity > max_allocation_bytes || !round_up_checked(capacity, page, capacity_))
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "host backend",
         "a simulated device of " + std::to_string(capacity) + " bytes cannot be mapped");
  if (capacity_ == 0) capacity_ = page;
  fd_ = ::memfd_create(memfd_name, MFD_CLOEXEC);
  if (fd_ < 0) fail(map_failed, "cudaErrorMapBufferObjectFailed", "memfd_create", strerror(errno));
  if (::ftruncate(fd_, static_cast<off_t>(capacity_)) != 0) {
    ::close(fd_);
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "ftruncate", strerror(errno));
  }
  void* base =
      ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (base == MAP_FAILED) {
    ::close(fd_);
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "mmap", strerror(errno));
  }
  base_ = static_cast<std::uint8_t*>(base);
  free_ranges_.emplace(0, capacity_);
}

host_arena::~host_arena() {
  ::munmap(base_, capacity_);
  ::close(fd_);
}

std::optional<std::size_t> host_arena::offset(void const* ptr) const {
  auto const* p = static_cast<std::uint8_t const*>(ptr);
  if (p < base_ || p >= base_ + capacity_) return std::nullopt;
  return static_cast<std::size_t>(p - base_);
}

void* host_arena::allocate(std::size_t bytes, char const* call, std::size_t alignment) {
  if (bytes == 0) return nullptr;
  if (alignment == 0) alignment = alignment_;
  GPUMEM_EXPECTS((alignment & (alignment - 1)) == 0,
                 std::string("host backend: ") + call + ": alignment must be a power of two, got " +
                     std::to_string(alignment));
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t rounded = 0;
  if (bytes <= capacity_ && round_up_checked(bytes, alignment_, rounded)) {
    for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
      std::size_t const range_start = it->first;
      std::size_t const range_end = range_start + it->second;
      std::size_t start = 0;
      if (!round_up_checked(range_start, alignment, start)) continue;
      if (start > range_end || range_end - start < rounded) continue;
      std::size_t const remaining = range_end - start - rounded;
      GPUMEM_ASSERT(range_start % alignment_ == 0 && range_end <= capacity_,
                    "a free range of the arena starts at a multiple of its alignment, inside it");
      free_ranges_.erase(it);
      // The part before an aligned start stays free (its offset is still a multiple of
      // alignment_, since every size in the arena is).
      if (start != range_start) free_ranges_.emplace(range_start, start - range_start);
      if (remaining != 0) free_ranges_.emplace(start + rounded, remaining);
      live_.emplace(start, rounded);
      used_ += rounded;
      peak_ = std::max(peak_, used_);
      return base_ + start;
    }
  }
  throw out_of_memory(bytes, "host backend device (" + format_bytes(capacity_) + ")", used_, peak_,
                      std::string("call ") + call);
}

void host_arena::retire(void* ptr, char const* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto const at = offset(ptr);
  if (!at || live_.count(*at) == 0)
    fail(invalid_value, "cudaErrorInvalidValue", call,
         pointer_text(ptr) + " is not the base of a live device allocation");
  if (!retiring_.insert(*at).second)
    fail(invalid_value, "cudaErrorInvalidValue", call,
         pointer_text(ptr) + " is already being freed in stream order (deallocate_async)");
}

void host_arena::unretire(void* ptr) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto const at = offset(ptr)) retiring_.erase(*at);
}

void host_arena::free_retired(void* ptr, char const* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_locked(ptr, call, true);
}

void host_arena::free(void* ptr, char const* call) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_locked(ptr, call, false);
}

void host_arena::free_locked(void* ptr, char const* call, bool retired) {
  auto const at = offset(ptr);
  auto live = at ? live_.find(*at) : live_.end();
  if (live == live_.end())
    fail(invalid_value, "cudaErrorInvalidValue", call,
         pointer_text(ptr) + " is not the base of a live device allocation");
  if (retiring_.count(*at) != (retired ? 1u : 0u))
    fail(invalid_value, "cudaErrorInvalidValue", call,
         pointer_text(ptr) + " is already being freed in stream order (deallocate_async)");
  retiring_.erase(*at);
  std::size_t start = live->first;
  std::size_t size = live->second;
  live_.erase(live);
  GPUMEM_ASSERT(used_ >= size, "the arena counts every live allocation in used_");
  used_ -= size;
  auto next = free_ranges_.lower_bound(start);
  GPUMEM_ASSERT(next == free_ranges_.end() || start + size <= next->first,
                "a live allocation does not overlap the free range after it");
  GPUMEM_ASSERT(
      next == free_ranges_.begin() || std::prev(next)->first + std::prev(next)->second <= start,
      "a live allocation does not overlap the free range before it");
  if (next != free_ranges_.end() && start + size == next->first) {
    size += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_ranges_.erase(prev);
    }
  }
  free_ranges_.emplace(start, size);
}

std::optional<address_range> host_arena::find(void const* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto const at = offset(ptr);
  if (!at) return std::nullopt;
  auto it = live_.upper_bound(*at);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (*at >= it->first + it->second) return std::nullopt;
  return address_range{base_ + it->first, it->second};
}

memory_info host_arena::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {capacity_ - used_, capacity_};
}

}  // namespace gpumem::detail::host
