// Internal to the host backend: in-order work queues standing in for CUDA streams and events.
//
// Each stream owns one worker thread that runs its tasks in FIFO order, so asynchronous copies are
// really asynchronous and events complete in the order they were recorded. An event remembers the
// sequence number of its latest record; it is complete once that record's task has run (an event
// never recorded is complete, as in CUDA).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gpumem {

struct stream_impl {
  // Never reused (a process-wide counter), unlike the stream's address: stream_id().
  std::uint64_t const id;

  stream_impl();
  ~stream_impl();  // drains the queue, then joins the worker
  stream_impl(stream_impl const&) = delete;
  stream_impl& operator=(stream_impl const&) = delete;

  void enqueue(std::function<void()> task);
  void synchronize();
  bool idle();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t enqueued_ = 0;
  std::uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

struct event_impl {
  explicit event_impl(bool with_timing) : timing(with_timing) {}
  bool const timing;
  std::mutex mutex;
  std::condition_variable completed_cv;
  std::uint64_t recorded = 0;   // sequence of the latest record
  std::uint64_t completed = 0;  // sequence of the latest record that has completed
  std::chrono::steady_clock::time_point completed_at{};

  bool query() {
    std::lock_guard<std::mutex> lock(mutex);
    return completed >= recorded;
  }
  void wait_for(std::uint64_t sequence) {
    std::unique_lock<std::mutex> lock(mutex);
    completed_cv.wait(lock, [&] { return completed >= sequence; });
  }
};

}  // namespace gpumem
