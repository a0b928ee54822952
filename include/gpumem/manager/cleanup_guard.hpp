// gpumem/manager/cleanup_guard.hpp
//
// The RAII object returned by `defer_cleanup()` (the C++ counterpart of Numba's `defer_cleanup`
// context manager). While a guard is alive, the memory manager that produced it avoids expensive
// cleanup (the default manager frees nothing); the guard's destructor ends the deferral.
//
// A guard is a list of release actions run in reverse order on destruction, so a manager that
// overrides defer_cleanup() composes its own deferral with its base class's:
//
//   cleanup_guard my_manager::defer_cleanup() {
//     cleanup_guard guard = host_only_memory_manager::defer_cleanup();  // host side first
//     guard.chain(pool_->defer_trimming());                             // then our own
//     return guard;
//   }
//
// Ownership: move-only; the actions belong to the guard. Thread safety: one guard is used by one
// thread at a time; different guards may live on different threads. Exception safety: the
// destructor is noexcept and runs every action even if one throws (the error is logged).
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace gpumem {

class cleanup_guard {
 public:
  cleanup_guard() = default;
  // `release` ends the deferral; it runs once, when the guard is destroyed or reset.
  explicit cleanup_guard(std::function<void()> release);
  cleanup_guard(cleanup_guard&& other) noexcept;
  cleanup_guard& operator=(cleanup_guard&& other) noexcept;
  cleanup_guard(cleanup_guard const&) = delete;
  cleanup_guard& operator=(cleanup_guard const&) = delete;
  ~cleanup_guard();

  // Takes over `inner`'s actions; they run before this guard's own (inner scope ends first).
  // Throws gpumem::logic_error when `inner` is this guard.
  cleanup_guard& chain(cleanup_guard&& inner);
  // Ends the deferral now (idempotent).
  void reset() noexcept;
  bool active() const noexcept { return !releases_.empty(); }

 private:
  std::vector<std::function<void()>> releases_;
};

}  // namespace gpumem
