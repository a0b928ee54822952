// Test doubles of the pool stress test (pool_stress_test.cpp): a backend that lies about
// completion, an upstream carved from one region taken up front, and a watchdog. None of them
// waits for the device after construction, so none can deadlock against a closed stream gate.
#pragma once

#include <gpumem/core/error.hpp>
#include "../support/forwarding_backend.hpp"

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace gpumem::pool_stress_detail {

// Forwards everything to another backend, but claims that every event and stream has completed
// (and never waits): a pool built on it reuses memory across streams too early.
class lying_backend final : public test::forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  bool query_stream(stream_handle stream) override {
    inner_.query_stream(stream);
    return true;
  }
  bool query_event(event_handle event) override {
    inner_.query_event(event);
    return true;
  }
  void synchronize_event(event_handle) override {}
};

// First fit over one region taken up front; give-backs coalesce. Never calls the backend after
// construction, so it never waits for the device. Test thread only.
class region_carver {
 public:
  region_carver(void* base, std::size_t bytes) : base_(reinterpret_cast<std::uintptr_t>(base)) {
    free_.emplace(base_, bytes);
  }
  void* take(std::size_t bytes) {  // null when no extent fits
    bytes = (bytes + 255) & ~std::size_t{255};
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      std::uintptr_t const at = it->first;
      std::size_t const rest = it->second - bytes;
      free_.erase(it);
      if (rest > 0) free_.emplace(at + bytes, rest);
      in_use_ += bytes;
      peak_ = std::max(peak_, in_use_);
      return reinterpret_cast<void*>(at);
    }
    return nullptr;
  }
  void give(void* p, std::size_t bytes) {
    bytes = (bytes + 255) & ~std::size_t{255};
    in_use_ -= bytes;
    auto at = reinterpret_cast<std::uintptr_t>(p);
    auto next = free_.lower_bound(at);
    if (next != free_.end() && next->first == at + bytes) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += bytes;
        return;
      }
    }
    free_.emplace(at, bytes);
  }
  std::size_t peak() const { return peak_; }

 private:
  std::uintptr_t base_;
  std::map<std::uintptr_t, std::size_t> free_;
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
};

// The pool's upstream: chunks carved from one device allocation made at construction. A chunk
// comes back only from trim or the pool's destructor, when every free in it has completed (as far
// as the pool knows: under the lying backend it knows wrong, which the model then reports).
class region_upstream final : public memory_resource {
 public:
  explicit region_upstream(std::size_t bytes)
      : base_(backend().allocate(bytes)), carver_(base_, bytes), bytes_(bytes) {}
  ~region_upstream() override { backend().deallocate(base_); }
  std::string name() const override { return "region_upstream"; }
  std::size_t peak() const { return carver_.peak(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override {
    if (void* p = carver_.take(bytes)) return p;
    throw out_of_memory(bytes, name(), 0, carver_.peak(), "the test region is too small");
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle) noexcept override {
    carver_.give(p, bytes);
  }

  void* base_;
  region_carver carver_;
  std::size_t bytes_;
};

// Aborts the process, naming the step, when the harness makes no progress for a long time: a hang
// (for instance a host function or an implicit device synchronisation waiting on a closed gate)
// becomes a failure with a message instead of a test that never ends.
class watchdog {
 public:
  explicit watchdog(std::atomic<int> const& step) : step_(step), thread_([this] { watch(); }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void watch() {
    int last = -1;
    int still = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [&] { return done_; })) {
      int const now = step_.load();
      still = now == last ? still + 1 : 0;
      last = now;
      if (still >= 60) {
        std::fprintf(stderr,
                     "pool_stress: no progress for 60 s at step %d (a deadlock); aborting\n", now);
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::atomic<int> const& step_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace gpumem::pool_stress_detail
