#include "host_stream.hpp"

#include <gpumem/core/assert.hpp>
#include <gpumem/core/logging.hpp>

#include <atomic>
#include <exception>
#include <string>

namespace gpumem {

namespace {
std::atomic<std::uint64_t> next_stream_id{1};
}  // namespace

stream_impl::stream_impl()
    : id(next_stream_id.fetch_add(1, std::memory_order_relaxed)), worker_([this] { run(); }) {}

stream_impl::~stream_impl() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
  GPUMEM_ASSERT(tasks_.empty() && completed_ == enqueued_,
                "a stream's worker runs every task queued before the stream is destroyed");
}

void stream_impl::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  work_ready_.notify_one();
}

void stream_impl::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t const target = enqueued_;
  work_done_.wait(lock, [&] { return completed_ >= target; });
}

bool stream_impl::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == enqueued_;
}

void stream_impl::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and drained
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    // A task that throws (a user's host function, a stream-ordered free of a bad pointer) must not
    // take the worker thread, and with it the process, down: report it and go on, as a CUDA
    // stream goes on after a host function.
    try {
      task();
    } catch (std::exception const& e) {
      log(log_level::error, std::string("a task on a host-backend stream threw: ") + e.what());
    } catch (...) {
      log(log_level::error, "a task on a host-backend stream threw");
    }
    lock.lock();
    ++completed_;
    work_done_.notify_all();
  }
}

}  // namespace gpumem
