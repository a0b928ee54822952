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
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace gpumem {

struct stream_impl;

// How many tasks a stream has run, shared with the tasks of other streams that wait for it
// (legacy_ordering). A waiter holds this, never the stream: a stream destroyed meanwhile must not
// be destroyed on the waiter's worker, since its destruction runs its own queue, whose later work
// may wait for that very worker.
struct stream_progress {
  std::mutex mutex;
  std::condition_variable advanced;
  std::uint64_t completed = 0;
  void wait_until(std::uint64_t count);
};

// CUDA's legacy default stream and its implicit synchronisation: work queued on the legacy stream
// waits for the work queued before it on every blocking stream (created without non_blocking, and
// the per-thread default streams), and work queued on a blocking stream waits for the work queued
// before it on the legacy stream. Non-blocking streams take no part. Each side's count is read
// before the new work is queued, so two queues never wait for each other.
class legacy_ordering {
 public:
  // The progress of the streams that work queued on `s` must first wait for, with their counts
  // of queued work.
  using waits = std::vector<std::pair<std::shared_ptr<stream_progress>, std::uint64_t>>;
  waits preceding(stream_impl const& s);
  // Takes part from now on: the legacy stream, or a blocking one (a non-blocking one is ignored).
  void add(std::shared_ptr<stream_impl> const& s);

 private:
  std::mutex mutex_;
  std::weak_ptr<stream_impl> legacy_;
  std::vector<std::weak_ptr<stream_impl>> blocking_;  // expired entries dropped as they are seen
  std::size_t prune_at_ = 16;                         // add() drops expired ones past this
};

struct stream_impl {
  enum class kind { legacy, blocking, non_blocking };
  // Never reused (a process-wide counter), unlike the stream's address: stream_id().
  std::uint64_t const id;
  kind const role;

  // A stream without `ordering` (or non_blocking) orders nothing but its own work.
  explicit stream_impl(kind stream_kind = kind::non_blocking,
                       std::shared_ptr<legacy_ordering> ordering = nullptr);
  ~stream_impl();  // drains the queue, then joins the worker
  stream_impl(stream_impl const&) = delete;
  stream_impl& operator=(stream_impl const&) = delete;

  void enqueue(std::function<void()> task);
  void synchronize();
  bool idle();
  // The number of tasks queued so far, or 0 when all of them have run; and a wait (on any
  // thread) until that many have run.
  std::uint64_t unfinished();
  void wait_until(std::uint64_t count);
  // Null for a stream that takes no part in the legacy ordering.
  std::shared_ptr<stream_progress> const& progress() const noexcept { return progress_; }

 private:
  void run();
  std::shared_ptr<legacy_ordering> const ordering_;
  std::shared_ptr<stream_progress> const progress_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t enqueued_ = 0;
  std::uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

// One record of an event: done once the stream it was recorded on reaches it. As with CUDA, a
// wait or synchronisation is for the record that was the event's latest when it was made; a later
// record of the same event, completed first on another stream, does not end it.
struct event_record {
  bool done = false;
  std::chrono::steady_clock::time_point done_at{};
};

struct event_impl {
  explicit event_impl(bool with_timing) : timing(with_timing) {}
  bool const timing;
  std::mutex mutex;
  std::condition_variable completed_cv;
  std::shared_ptr<event_record> latest;  // null: never recorded (complete, as CUDA says)

  std::shared_ptr<event_record> current() {
    std::lock_guard<std::mutex> lock(mutex);
    return latest;
  }
  bool query() {
    std::lock_guard<std::mutex> lock(mutex);
    return latest == nullptr || latest->done;
  }
  void wait_for(std::shared_ptr<event_record> const& record) {
    if (record == nullptr) return;
    std::unique_lock<std::mutex> lock(mutex);
    completed_cv.wait(lock, [&] { return record->done; });
  }
  void complete(event_record& record) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      record.done = true;
      record.done_at = std::chrono::steady_clock::now();
    }
    completed_cv.notify_all();
  }
};

}  // namespace gpumem
