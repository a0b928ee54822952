// The contended paths of pool_lock (see pool_lock.hpp).
#include "pool_lock.hpp"

#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace gpumem::detail {

namespace {

// Tries to take a lock held by another thread while that thread is likely still inside its short
// critical section, before sleeping.
constexpr int pool_lock_spins = 128;
// The longest sleep before a sleeper looks at the lock again: what a missed wake (pool_lock.hpp)
// costs at most.
constexpr long pool_lock_sleep_ns = 200'000;

inline void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void sleep_while(std::atomic<std::uint32_t>& state, std::uint32_t value) noexcept {
#if defined(__linux__)
  // Returns at once if the state is no longer `value` (EAGAIN), on a wake, after the bound, or
  // spuriously (EINTR): the caller looks again either way.
  timespec const bound{0, pool_lock_sleep_ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAIT_PRIVATE, value, &bound,
          nullptr, 0);
#else
  (void)state;
  (void)value;
  std::this_thread::yield();
#endif
}

void wake_one(std::atomic<std::uint32_t>& state) noexcept {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAKE_PRIVATE, 1, nullptr,
          nullptr, 0);
#else
  (void)state;
#endif
}

}  // namespace

bool pool_lock::try_take() noexcept {
  std::uint32_t expected = 0;
  return state_.load(std::memory_order_relaxed) == 0 &&
         state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed);
}

void pool_lock::lock_contended() noexcept {
  for (int i = 0; i < pool_lock_spins; ++i) {
    relax();
    if (try_take()) return;
  }
  // Counted as a sleeper before looking again (the read-modify-write orders the two), so that most
  // releases after that look see the count and wake a sleeper; a release whose store is not yet
  // visible to others when it reads the count may not (pool_lock.hpp): the sleep is bounded.
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  while (!try_take())
    sleep_while(state_, 1);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void pool_lock::wake_sleeper() noexcept {
  wake_one(state_);
}

}  // namespace gpumem::detail
