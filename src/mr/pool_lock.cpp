// The contended paths of pool_lock (see pool_lock.hpp).
#include "pool_lock.hpp"

#include <algorithm>
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
// How long a sleeper sleeps before it looks at the lock again, wake or no wake: at first (what a
// missed wake, pool_lock.hpp, costs most sleepers), then twice as long each time it finds the lock
// still held, up to the most (so that many threads waiting on a long holder do not keep waking).
constexpr long pool_lock_first_sleep_ns = 200'000;
constexpr long pool_lock_longest_sleep_ns = 3'200'000;

inline void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void sleep_while(std::atomic<std::uint32_t>& state, std::uint32_t value, long ns) noexcept {
#if defined(__linux__)
  // Returns at once if the state is no longer `value` (EAGAIN), on a wake, after `ns`, or
  // spuriously (EINTR): the caller looks again either way.
  timespec const bound{0, ns};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAIT_PRIVATE, value, &bound,
          nullptr, 0);
#else
  (void)state;
  (void)value;
  (void)ns;
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
  for (long sleep_ns = pool_lock_first_sleep_ns; !try_take();
       sleep_ns = std::min(2 * sleep_ns, pool_lock_longest_sleep_ns))
    sleep_while(state_, 1, sleep_ns);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void pool_lock::wake_sleeper() noexcept {
  wake_one(state_);
}

}  // namespace gpumem::detail
