// The contended paths of pool_lock (see pool_lock.hpp).
#include "pool_lock.hpp"

#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace gpumem::detail {

namespace {

// Tries to take a lock held by another thread while that thread is likely still inside its short
// critical section, before sleeping.
constexpr int pool_lock_spins = 128;

inline void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void sleep_while(std::atomic<std::uint32_t>& state, std::uint32_t value) noexcept {
#if defined(__linux__)
  // Returns at once if the state is no longer `value` (EAGAIN), on a wake, or spuriously (EINTR):
  // the caller looks again either way.
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAIT_PRIVATE, value, nullptr,
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

void pool_lock::lock_contended() noexcept {
  for (int i = 0; i < pool_lock_spins; ++i) {
    relax();
    std::uint32_t expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
  }
  // Mark the lock as having sleepers (2) and sleep until it is found free; whoever takes it this
  // way leaves it at 2, so its release wakes the next sleeper (at worst one wake too many).
  while (state_.exchange(2, std::memory_order_acquire) != 0)
    sleep_while(state_, 2);
}

void pool_lock::unlock_contended() noexcept {
  // The state was 2: there may be sleepers. Free it, then wake one of them.
  state_.store(0, std::memory_order_release);
  wake_one(state_);
}

}  // namespace gpumem::detail
