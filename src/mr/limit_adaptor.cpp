#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/limit_adaptor.hpp>

#include <algorithm>

namespace gpumem {

std::string limit_adaptor::name() const {
  return "limit_adaptor (limit " + format_bytes(limit_) + ") over " + upstream_->name();
}

memory_info limit_adaptor::get_memory_info() const {
  std::size_t const used = used_.load(std::memory_order_relaxed);
  std::size_t free = used < limit_ ? limit_ - used : 0;
  try {
    free = std::min(free, upstream_->get_memory_info().free);
  } catch (not_supported const&) {
  }
  return {free, limit_};
}

void* limit_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  if (bytes == 0) return nullptr;
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      throw out_of_memory(bytes, name(), used, peak_.load(std::memory_order_relaxed),
                          "the limit is " + format_bytes(limit_) + ", " +
                              format_bytes(limit_ - std::min(used, limit_)) + " left under it");
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  void* p;
  try {
    p = upstream_->allocate(bytes, stream);
  } catch (...) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    throw;
  }
  // The peak counts only what the upstream granted: a refused request was never live. (With
  // allocations in flight on other threads, `now` may include their reservations.)
  std::size_t const now = used + bytes;
  std::size_t seen = peak_.load(std::memory_order_relaxed);
  while (now > seen && !peak_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  return p;
}

void limit_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  deallocation_watch const watch;
  upstream_->deallocate(ptr, bytes, stream);
  // A refused free (a double free caught below) frees nothing: the bytes stay counted.
  if (watch.refused()) return;
  std::size_t used = used_.load(std::memory_order_relaxed);  // never below 0 (as usage_counters)
  while (
      !used_.compare_exchange_weak(used, used - std::min(used, bytes), std::memory_order_relaxed)) {
  }
}

}  // namespace gpumem
