#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <algorithm>
#include <exception>
#include <string>

namespace gpumem {

namespace {
std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
  std::size_t product = 0;
  return checked_mul(a, b, product) ? product : ~std::size_t{0};
}
}  // namespace

pending_deallocations::pending_deallocations(std::size_t max_count, std::size_t max_bytes)
    : max_count_(max_count),
      max_bytes_(max_bytes),
      max_retired_count_(saturating_mul(retired_batches, max_count)),
      max_retired_bytes_(max_bytes / retired_batches) {}

pending_deallocations::~pending_deallocations() {
  close();
}

std::size_t pending_deallocations::max_bytes_for(std::size_t total, double ratio) noexcept {
  double const bytes = ratio * static_cast<double>(total);
  // Converting 2^64 (or more) back to size_t would be undefined.
  constexpr double two_to_64 = 18446744073709551616.0;
  if (!(bytes < two_to_64)) return ~std::size_t{0};
  return bytes <= 0 ? 0 : static_cast<std::size_t>(bytes);
}

bool pending_deallocations::over_limits_locked() const noexcept {
  // Both comparisons strict, as Numba's _PendingDeallocs.add_item.
  return items_.size() > max_count_ || bytes_ > max_bytes_;
}

bool pending_deallocations::retired_over_limits_locked() const noexcept {
  return retired_.size() > max_retired_count_ || retired_bytes_ > max_retired_bytes_;
}

pending_deallocations::batch pending_deallocations::take_queued_locked() {
  batch taken;
  taken.queued.swap(items_);
  bytes_ = 0;
  // Room for the next batch at once (one allocation per flush, not one per doubling); failing to
  // get it only means growing later.
  try {
    items_.reserve(max_count_ < 64 ? max_count_ + 1 : 64);
  } catch (...) {
  }
  return taken;
}

std::vector<pending_deallocations::item> pending_deallocations::take_retired_locked() {
  std::vector<item> taken;
  std::size_t const capacity = retired_.capacity();
  taken.swap(retired_);
  retired_bytes_ = 0;
  // The next cycle's room at once (one allocation per release of the retired list, not one per
  // retired batch); failing to get it only means growing later.
  try {
    retired_.reserve(capacity);
  } catch (...) {
  }
  return taken;
}

pending_deallocations::batch pending_deallocations::take_all_locked() {
  batch taken = take_queued_locked();
  if (!retired_.empty()) taken.retired = take_retired_locked();
  return taken;
}

pending_deallocations::batch pending_deallocations::retire_locked() {
  // The items move one by one: the queue keeps its vector (no allocation per batch), and so does
  // the retired list once it has grown to a cycle's size.
  std::size_t const needed = retired_.size() + items_.size();
  if (retired_.capacity() < needed) {
    try {
      retired_.reserve(std::max(needed, 2 * retired_.capacity()));
    } catch (...) {
      return take_all_locked();  // no room to retire them: release everything behind the barrier
    }
  }
  for (item& i : items_)
    retired_.push_back(std::move(i));
  items_.clear();
  retired_bytes_ = saturating_add(retired_bytes_, bytes_);
  bytes_ = 0;
  if (!retired_over_limits_locked()) return {};
  batch taken;
  taken.retired = take_retired_locked();
  return taken;
}

std::size_t pending_deallocations::run(batch& items, barrier const& before) noexcept {
  if (items.empty()) return 0;
  if (before && *before) {
    try {
      (*before)();
    } catch (std::exception const& e) {
      log(log_level::error,
          "pending deallocations: the release barrier failed: " + std::string(e.what()) +
              " (releasing the " + std::to_string(items.retired.size() + items.queued.size()) +
              " item(s) anyway)");
    } catch (...) {
      log(log_level::error,
          "pending deallocations: the release barrier failed with a non-standard exception");
    }
  }
  return release_all(items.retired) + release_all(items.queued);
}

std::size_t pending_deallocations::release_all(std::vector<item>& items) noexcept {
  std::size_t ran = 0;
  std::size_t failed = 0;
  std::size_t const total = items.size();
  for (std::size_t i = 0; i < total; ++i) {
    item current = std::move(items[i]);
    if (!current.release) {  // a block_free: reports its own errors
      current.block.release(current.block.state.get(), current.block.ptr, current.bytes,
                            current.block.stream);
      ++ran;
      continue;
    }
    try {
      current.release();
      ++ran;
    } catch (std::exception const& e) {
      ++failed;
      log(log_level::error, "pending deallocation of " + std::to_string(current.bytes) +
                                " bytes failed: " + e.what() + " (continuing with the " +
                                std::to_string(total - i - 1) + " remaining of " +
                                std::to_string(total) + ")");
    } catch (...) {
      ++failed;
      log(log_level::error, "pending deallocation of " + std::to_string(current.bytes) +
                                " bytes failed with a non-standard exception (continuing)");
    }
    // `current` is destroyed here, after its release ran: whatever the release captured (a
    // pinned range's owner) goes only now.
  }
  items.clear();
  (void)failed;
  return ran;
}

void pending_deallocations::enqueue(std::function<void()> release, std::size_t bytes) {
  enqueue_item(item{std::move(release), block_free{}, bytes});
}

void pending_deallocations::enqueue(block_free block, std::size_t bytes) {
  GPUMEM_EXPECTS(block.release != nullptr, "pending_deallocations::enqueue: no release function");
  enqueue_item(item{{}, std::move(block), bytes});
}

void pending_deallocations::enqueue_item(item queued) {
  batch taken;  // allocates only when a batch is taken
  barrier before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      taken.queued.push_back(std::move(queued));
    } else {
      std::size_t const bytes = queued.bytes;
      items_.push_back(std::move(queued));
      bytes_ = saturating_add(bytes_, bytes);
      // Past a limit: retired (released later, behind one barrier for many batches) where a
      // barrier is set, released now where none is.
      if (deferral_depth_ == 0 && over_limits_locked())
        taken = barrier_ ? retire_locked() : take_queued_locked();
    }
    if (!taken.empty()) before = barrier_;
  }
  run(taken, before);
}

std::size_t pending_deallocations::flush() {
  batch taken;
  barrier before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deferral_depth_ > 0) return 0;
    taken = take_all_locked();
    before = barrier_;
  }
  return run(taken, before);
}

void pending_deallocations::close() noexcept {
  batch taken;
  barrier before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    taken = take_all_locked();
    before = barrier_;
  }
  run(taken, before);
}

void pending_deallocations::set_release_barrier(std::function<void()> barrier_function) {
  barrier fresh;
  if (barrier_function)
    fresh = std::make_shared<std::function<void()> const>(std::move(barrier_function));
  batch retired;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    barrier_.swap(fresh);
    // Items retired under the old barrier are released behind it: the new one may not cover them
    // (or be none).
    retired.retired = take_retired_locked();
  }
  run(retired, fresh);  // `fresh` now holds the old barrier
}

std::size_t pending_deallocations::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

std::size_t pending_deallocations::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

std::size_t pending_deallocations::retired_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return retired_.size();
}

std::size_t pending_deallocations::retired_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return retired_bytes_;
}

bool pending_deallocations::is_deferred() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deferral_depth_ > 0;
}

bool pending_deallocations::is_closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

cleanup_guard pending_deallocations::defer_cleanup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++deferral_depth_;
  }
  // A queue owned by a shared_ptr (every context's) is held weakly: a guard that outlives it (kept
  // across gpumem::close()) ends nothing. One owned otherwise must outlive its guards.
  std::weak_ptr<pending_deallocations> owner = weak_from_this();
  if (owner.expired()) return cleanup_guard([this] { end_deferral(); });
  return cleanup_guard([owner = std::move(owner)] {
    if (std::shared_ptr<pending_deallocations> queue = owner.lock()) queue->end_deferral();
  });
}

void pending_deallocations::end_deferral() noexcept {
  batch taken;
  barrier before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deferral_depth_ > 0) --deferral_depth_;
    // Frees held back by the deferral that put the queue over a limit happen as it ends, with the
    // retired ones behind the same barrier.
    if (deferral_depth_ == 0 && over_limits_locked()) taken = take_all_locked();
    if (!taken.empty()) before = barrier_;
  }
  run(taken, before);
}

namespace {
template <class Items>
std::size_t checked_sum(Items const& items, char const* which) {
  std::size_t sum = 0;
  for (auto const& i : items) {
    GPUMEM_EXPECTS(static_cast<bool>(i.release) || i.block.release != nullptr,
                   std::string("pending_deallocations: ") + which + " item has no release");
    sum = saturating_add(sum, i.bytes);
  }
  return sum;
}
}  // namespace

void pending_deallocations::check_invariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t const sum = checked_sum(items_, "a queued");
  GPUMEM_EXPECTS(sum == bytes_, "pending_deallocations: byte count " + std::to_string(bytes_) +
                                    " differs from the sum of the items " + std::to_string(sum));
  std::size_t const retired_sum = checked_sum(retired_, "a retired");
  GPUMEM_EXPECTS(retired_sum == retired_bytes_,
                 "pending_deallocations: retired byte count " + std::to_string(retired_bytes_) +
                     " differs from the sum of the retired items " + std::to_string(retired_sum));
  GPUMEM_EXPECTS(!closed_ || (items_.empty() && retired_.empty()),
                 "pending_deallocations: closed queue holds " + std::to_string(items_.size()) +
                     " items and " + std::to_string(retired_.size()) + " retired");
  GPUMEM_EXPECTS(deferral_depth_ > 0 || !over_limits_locked(),
                 "pending_deallocations: not deferred but over a limit (" +
                     std::to_string(items_.size()) + " items, " + std::to_string(bytes_) +
                     " bytes; limits " + std::to_string(max_count_) + " items, " +
                     std::to_string(max_bytes_) + " bytes)");
  GPUMEM_EXPECTS(!retired_over_limits_locked(),
                 "pending_deallocations: the retired list is over its limits (" +
                     std::to_string(retired_.size()) + " items, " + std::to_string(retired_bytes_) +
                     " bytes; limits " + std::to_string(max_retired_count_) + " items, " +
                     std::to_string(max_retired_bytes_) + " bytes)");
  GPUMEM_EXPECTS(barrier_ != nullptr || retired_.empty(),
                 "pending_deallocations: " + std::to_string(retired_.size()) +
                     " items retired without a release barrier");
}

}  // namespace gpumem
