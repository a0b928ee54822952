#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/cleanup_guard.hpp>

#include <exception>
#include <string>

namespace gpumem {

cleanup_guard::cleanup_guard(std::function<void()> release) {
  if (release) releases_.push_back(std::move(release));
}

cleanup_guard::cleanup_guard(cleanup_guard&& other) noexcept
    : releases_(std::move(other.releases_)) {
  other.releases_.clear();
}

cleanup_guard& cleanup_guard::operator=(cleanup_guard&& other) noexcept {
  if (this != &other) {
    reset();
    releases_ = std::move(other.releases_);
    other.releases_.clear();
  }
  return *this;
}

cleanup_guard::~cleanup_guard() {
  reset();
}

cleanup_guard& cleanup_guard::chain(cleanup_guard&& inner) {
  // A guard chained into itself would move each action onto the vector it is read from.
  GPUMEM_EXPECTS(&inner != this, "cleanup_guard::chain: a guard cannot be chained into itself");
  // Actions run from the back: the inner guard's go last in the vector so they run first.
  for (auto& release : inner.releases_)
    releases_.push_back(std::move(release));
  inner.releases_.clear();
  return *this;
}

void cleanup_guard::reset() noexcept {
  while (!releases_.empty()) {
    std::function<void()> release = std::move(releases_.back());
    releases_.pop_back();
    try {
      release();
    } catch (std::exception const& e) {
      log(log_level::error, std::string("cleanup_guard: ending a deferral failed: ") + e.what());
    } catch (...) {
      log(log_level::error,
          "cleanup_guard: ending a deferral failed with a non-standard exception");
    }
  }
}

}  // namespace gpumem
