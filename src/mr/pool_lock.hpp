// The lock of a pool stream's arena and of a shard of the hashed table of live large blocks
// (private to src/mr/pool_*.cpp). Such a lock is almost never contended (one thread per stream is
// the common case), so what counts is its uncontended cost: one compare-and-swap to take it and a
// plain store to release it, inline (a large allocate+free pair takes two such locks and claims two
// map entries with a compare-and-swap each; every atomic read-modify-write left out of them is a
// few nanoseconds of the pair's 200-300 on the build machine's x86 host). Under contention it spins
// briefly (the arena's critical sections are short), then sleeps in the kernel (a futex on Linux;
// elsewhere it yields), so threads sharing one stream do not burn their cores. Meets the Lockable
// requirements (std::lock_guard, std::unique_lock, std::try_to_lock). Not recursive; unlock() only
// by the holder.
//
// State: 0 free, 1 held; `sleepers_` counts the threads that sleep (or are about to) until it is
// free. The release stores 0 and then reads `sleepers_`, waking one sleeper if there is any.
// Without a fence between that store and that read (the fence would cost what the store saves), a
// thread that counted itself as a sleeper just as the lock was released can miss its wake: every
// sleep is therefore bounded (0.2 ms, then longer while the lock stays held, up to 3.2 ms:
// pool_lock.cpp), and a missed wake costs that sleeper at most one such interval, never a hang. The
// release reads `sleepers_` after the store that frees the lock: a pool_lock must not be destroyed
// while a thread may still be in unlock() (unlike std::mutex, which one may destroy as soon as it
// can be locked again). The pool destroys a stream's arena, and the table its shards, only when no
// thread uses them.
#pragma once

#include <atomic>
#include <cstdint>

// Under ThreadSanitizer the lock tells it what it is (its mutex annotations): TSan then checks the
// order in which these locks are taken against every other lock's, as it does for std::mutex.
#if defined(__SANITIZE_THREAD__)
#define GPUMEM_POOL_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPUMEM_POOL_LOCK_TSAN 1
#endif
#endif
#if defined(GPUMEM_POOL_LOCK_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace gpumem::detail {

class pool_lock {
 public:
  pool_lock() noexcept { annotate(create); }
  ~pool_lock() { annotate(destroy); }
  pool_lock(pool_lock const&) = delete;
  pool_lock& operator=(pool_lock const&) = delete;

  void lock() noexcept {
    annotate(pre_lock);
    std::uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed))
      lock_contended();
    annotate(post_lock);
  }
  bool try_lock() noexcept {
    annotate(pre_try_lock);
    std::uint32_t expected = 0;
    bool const taken = state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                                      std::memory_order_relaxed);
    annotate(taken ? post_try_lock : post_try_lock_failed);
    return taken;
  }
  void unlock() noexcept {
    annotate(pre_unlock);
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) wake_sleeper();
    annotate(post_unlock);
  }

 private:
  enum event {
    create,
    destroy,
    pre_lock,
    post_lock,
    pre_try_lock,
    post_try_lock,
    post_try_lock_failed,
    pre_unlock,
    post_unlock
  };
  // Nothing but under ThreadSanitizer.
  void annotate(event e) noexcept {
#if defined(GPUMEM_POOL_LOCK_TSAN)
    void* const self = this;
    switch (e) {
      case create:
        __tsan_mutex_create(self, __tsan_mutex_not_static);
        break;
      case destroy:
        __tsan_mutex_destroy(self, __tsan_mutex_not_static);
        break;
      case pre_lock:
        __tsan_mutex_pre_lock(self, 0);
        break;
      case post_lock:
        __tsan_mutex_post_lock(self, 0, 0);
        break;
      case pre_try_lock:
        __tsan_mutex_pre_lock(self, __tsan_mutex_try_lock);
        break;
      case post_try_lock:
        __tsan_mutex_post_lock(self, __tsan_mutex_try_lock, 0);
        break;
      case post_try_lock_failed:
        __tsan_mutex_post_lock(self, __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed, 0);
        break;
      case pre_unlock:
        __tsan_mutex_pre_unlock(self, 0);
        break;
      case post_unlock:
        __tsan_mutex_post_unlock(self, 0);
        break;
    }
#else
    (void)e;
#endif
  }

  bool try_take() noexcept;  // a compare-and-swap, after a look that finds it free
  void lock_contended() noexcept;
  void wake_sleeper() noexcept;

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace gpumem::detail
