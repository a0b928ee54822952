#include "host_stream.hpp"

namespace gpumem {

stream_impl::stream_impl() : worker_([this] { run(); }) {}

stream_impl::~stream_impl() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
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
    task();  // tasks never throw: the backend wraps them
    lock.lock();
    ++completed_;
    work_done_.notify_all();
  }
}

}  // namespace gpumem
