// The lock of a pool stream's arena and of a shard of the live large blocks (private to
// src/mr/pool_*.cpp). Such a lock is almost never contended (one thread per stream is the common
// case), so what counts is its uncontended cost: one compare-and-swap to take it and one atomic
// decrement to release it, inline, about half a std::mutex's lock and unlock through pthreads (6.5
// against 12.5 ns on the build machine's x86 host; a large allocate+free pair takes four). Under
// contention it spins briefly (the arena's critical sections are short), then sleeps in the kernel
// (a futex on Linux; elsewhere it yields), so threads sharing one stream do not burn their cores.
// Meets the Lockable requirements (std::lock_guard, std::unique_lock, std::try_to_lock). Not
// recursive; unlock() only by the holder.
//
// States: 0 free, 1 held, 2 held with sleepers possible. Taking it from 0 sets 1; a waiter sets 2
// before it sleeps, so that the release (which finds 2 where it expected 1) wakes one.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpumem::detail {

class pool_lock {
 public:
  pool_lock() = default;
  pool_lock(pool_lock const&) = delete;
  pool_lock& operator=(pool_lock const&) = delete;

  void lock() noexcept {
    std::uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed))
      lock_contended();
  }
  bool try_lock() noexcept {
    std::uint32_t expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.fetch_sub(1, std::memory_order_release) != 1) unlock_contended();
  }

 private:
  void lock_contended() noexcept;
  void unlock_contended() noexcept;

  std::atomic<std::uint32_t> state_{0};
};

}  // namespace gpumem::detail
