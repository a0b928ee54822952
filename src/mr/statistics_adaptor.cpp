#include <gpumem/mr/statistics_adaptor.hpp>

#include <algorithm>
#include <limits>

namespace gpumem {

namespace {
constexpr std::int64_t counter_max = std::numeric_limits<std::int64_t>::max();

// A byte count as a counter amount. Nothing above max_allocation_bytes (= INT64_MAX) is ever
// allocated, but a conversion must not turn a larger one negative.
std::int64_t amount_of(std::size_t bytes) noexcept {
  return static_cast<std::int64_t>(std::min<std::size_t>(bytes, counter_max));
}
}  // namespace

void statistics_adaptor::atomic_counter::add(std::int64_t amount) noexcept {
  std::int64_t const was = current.fetch_add(amount, std::memory_order_relaxed);
  std::int64_t const now = was > counter_max - amount ? counter_max : was + amount;
  // The total only grows (over a pool, churn of 1 GiB blocks at millions per second passes 2^63
  // bytes within the hour): it saturates instead of wrapping negative (atomic addition wraps).
  std::int64_t const before = total.fetch_add(amount, std::memory_order_relaxed);
  if (before > counter_max - amount) total.store(counter_max, std::memory_order_relaxed);
  std::int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

// Never below 0 (a free that freed nothing but was not reported as refused must not make the
// count negative).
void statistics_adaptor::atomic_counter::subtract(std::int64_t amount) noexcept {
  std::int64_t now = current.load(std::memory_order_relaxed);
  while (
      !current.compare_exchange_weak(now, now - std::min(now, amount), std::memory_order_relaxed)) {
  }
}

resource_counter statistics_adaptor::atomic_counter::load() const noexcept {
  return {current.load(std::memory_order_relaxed), peak.load(std::memory_order_relaxed),
          total.load(std::memory_order_relaxed)};
}

void statistics_adaptor::atomic_counter::reset() noexcept {
  peak.store(current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  total.store(0, std::memory_order_relaxed);
}

resource_statistics statistics_adaptor::statistics() const noexcept {
  return {bytes_.load(), allocations_.load()};
}

void statistics_adaptor::reset_peaks_and_totals() noexcept {
  bytes_.reset();
  allocations_.reset();
}

void* statistics_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* p = upstream_->allocate(bytes, stream);
  if (p != nullptr) {
    bytes_.add(amount_of(bytes));
    allocations_.add(1);
  }
  return p;
}

void statistics_adaptor::do_deallocate(void* ptr, std::size_t bytes,
                                       stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  deallocation_watch const watch;
  upstream_->deallocate(ptr, bytes, stream);
  if (watch.refused()) return;  // nothing was freed (a double free caught below)
  bytes_.subtract(amount_of(bytes));
  allocations_.subtract(1);
}

}  // namespace gpumem
