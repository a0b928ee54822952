#include "host_stream.hpp"

#include <gpumem/core/assert.hpp>
#include <gpumem/core/logging.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>

namespace gpumem {

namespace {
std::atomic<std::uint64_t> next_stream_id{1};
}  // namespace

legacy_ordering::waits legacy_ordering::preceding(stream_impl const& s) {
  waits out;
  if (s.role == stream_impl::kind::non_blocking) return out;
  std::vector<std::shared_ptr<stream_impl>> others;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s.role == stream_impl::kind::blocking) {
      if (auto legacy = legacy_.lock()) others.push_back(std::move(legacy));
    } else {
      for (auto it = blocking_.begin(); it != blocking_.end();) {
        if (auto b = it->lock()) {
          others.push_back(std::move(b));
          ++it;
        } else {
          it = blocking_.erase(it);
        }
      }
    }
  }
  for (auto const& other : others)
    if (std::uint64_t const count = other->unfinished(); count != 0)
      out.emplace_back(other->progress(), count);
  return out;
}

void stream_progress::wait_until(std::uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex);
  advanced.wait(lock, [&] { return completed >= count; });
}

void legacy_ordering::add(std::shared_ptr<stream_impl> const& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (s->role == stream_impl::kind::legacy) {
    legacy_ = s;
    return;
  }
  if (s->role != stream_impl::kind::blocking) return;
  // Destroyed streams are dropped here too (amortised), not only when the legacy stream gets work:
  // a program that never uses it would keep every destroyed stream's control block.
  if (blocking_.size() >= prune_at_) {
    blocking_.erase(std::remove_if(blocking_.begin(), blocking_.end(),
                                   [](std::weak_ptr<stream_impl> const& w) { return w.expired(); }),
                    blocking_.end());
    prune_at_ = 2 * blocking_.size() + 16;
  }
  blocking_.push_back(s);
}

stream_impl::stream_impl(kind stream_kind, std::shared_ptr<legacy_ordering> ordering)
    : id(next_stream_id.fetch_add(1, std::memory_order_relaxed)),
      role(stream_kind),
      ordering_(std::move(ordering)),
      progress_(ordering_ ? std::make_shared<stream_progress>() : nullptr),
      worker_([this] { run(); }) {}

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
  if (ordering_) {
    // Read before this task is queued (legacy_ordering): the other side's earlier work.
    legacy_ordering::waits waits = ordering_->preceding(*this);
    if (!waits.empty())
      task = [waits = std::move(waits), work = std::move(task)] {
        for (auto const& [progress, count] : waits)
          progress->wait_until(count);
        work();
      };
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  work_ready_.notify_one();
}

void stream_impl::synchronize() {
  wait_until(unfinished());
}

std::uint64_t stream_impl::unfinished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == enqueued_ ? 0 : enqueued_;
}

void stream_impl::wait_until(std::uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return completed_ >= count; });
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
    if (progress_) {  // before completed_: a synchronize() that returns sees the waiters' count too
      {
        std::lock_guard<std::mutex> advance(progress_->mutex);
        ++progress_->completed;
      }
      progress_->advanced.notify_all();
    }
    lock.lock();
    ++completed_;
    work_done_.notify_all();
  }
}

}  // namespace gpumem
