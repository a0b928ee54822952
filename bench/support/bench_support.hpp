// Shared helpers of gpumem's benchmarks: the device line, a stopwatch, a start barrier for
// threads, a team of threads kept across runs, and a plain text table. Header-only; any
// bench/<name>.cpp may include it as "support/bench_support.hpp".
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpumem::bench {

// "cuda: NVIDIA H100 80GB HBM3" or "host: ..." — every benchmark prints it first.
inline std::string device_line() {
  return backend().description();
}

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Runs body(thread_index) on `threads` threads released together; returns the wall seconds from
// the release to the last thread's end. With `per_thread`, also each thread's own seconds (from its
// start of body to its end), which show a straggler.
template <class Body>
double run_threads(int threads, Body body, std::vector<double>* per_thread = nullptr) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(threads));
  std::vector<double> own(static_cast<std::size_t>(threads));
  std::atomic<bool> cancelled{false};  // a thread could not be started: the others skip body
  std::vector<std::thread> pool;
  try {
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire))
          std::this_thread::yield();
        if (cancelled.load(std::memory_order_relaxed)) return;
        stopwatch mine;
        try {
          body(t);
        } catch (...) {
          failures[static_cast<std::size_t>(t)] = std::current_exception();
        }
        own[static_cast<std::size_t>(t)] = mine.seconds();
      });
  } catch (...) {  // std::system_error: no more threads; the started ones end before it is thrown
    cancelled.store(true, std::memory_order_relaxed);
    go.store(true, std::memory_order_release);
    for (auto& th : pool)
      th.join();
    throw;
  }
  while (ready.load() < threads)
    std::this_thread::yield();
  stopwatch clock;
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();
  double const seconds = clock.seconds();
  if (per_thread != nullptr) *per_thread = std::move(own);
  // A thread's exception (out of memory, say) is the caller's to report.
  for (auto const& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return seconds;
}

// `threads` threads kept across runs (a training program's workers live as long as its loop): each
// run() releases them together on body(thread_index) and returns the wall seconds from the release
// to the last thread's end, like run_threads, without starting or ending a thread (whose exit
// flushes its caches and leaves its stream without a user). Not thread safe: one caller.
class thread_team {
 public:
  explicit thread_team(int threads) : own_(static_cast<std::size_t>(threads)) {
    failures_.resize(own_.size());
    try {
      for (int t = 0; t < threads; ++t)
        workers_.emplace_back([this, t] { work(t); });
    } catch (...) {  // std::system_error: no more threads; the started ones end before it is thrown
      stop();
      throw;
    }
  }
  ~thread_team() { stop(); }
  thread_team(thread_team const&) = delete;
  thread_team& operator=(thread_team const&) = delete;

  template <class Body>
  double run(Body body, std::vector<double>* per_thread = nullptr) {
    std::function<void(int)> job = body;
    stopwatch clock;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      done_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait(lock, [&] { return done_ == own_.size(); });
      job_ = nullptr;
    }
    double const seconds = clock.seconds();
    if (per_thread != nullptr) *per_thread = own_;
    // The first failure is the caller's; every one is cleared, so that none is rethrown by a
    // later run in which no thread failed.
    std::exception_ptr first;
    for (auto& failure : failures_)
      if (auto taken = std::exchange(failure, nullptr); taken && !first) first = std::move(taken);
    if (first) std::rethrow_exception(first);
    return seconds;
  }

 private:
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& w : workers_)
      w.join();
    workers_.clear();
  }
  void work(int t) {
    std::uint64_t seen = 0;
    for (;;) {
      std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stopping_) return;
        job = job_;
      }
      stopwatch mine;
      try {
        (*job)(t);
      } catch (...) {
        failures_[static_cast<std::size_t>(t)] = std::current_exception();
      }
      own_[static_cast<std::size_t>(t)] = mine.seconds();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++done_;
      }
      finished_.notify_one();
    }
  }

  std::vector<double> own_;
  std::vector<std::exception_ptr> failures_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  std::size_t done_ = 0;
  bool stopping_ = false;
};

// A text table: add rows of cells, print with columns padded to their widest cell.
class table {
 public:
  explicit table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::FILE* out = stdout) const {
    std::vector<std::size_t> width;
    for (auto const& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (std::size_t i = 0; i < row.size(); ++i)
        width[i] = std::max(width[i], row[i].size());
    }
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      std::string line;
      for (std::size_t i = 0; i < rows_[r].size(); ++i) {
        std::string cell = rows_[r][i];
        cell.resize(width[i], ' ');
        line += (i == 0 ? "" : "  ") + cell;
      }
      while (!line.empty() && line.back() == ' ')
        line.pop_back();
      std::fprintf(out, "%s\n", line.c_str());
      if (r == 0) std::fprintf(out, "%s\n", std::string(line.size(), '-').c_str());
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

inline std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// "1234 ns (12.3x)": a competitor's time and its ratio to the reference.
inline std::string with_ratio(double ns, double reference_ns) {
  if (ns <= 0) return "-";
  return fixed(ns, ns < 100 ? 1 : 0) + " (" +
         fixed(ns / reference_ns, ns / reference_ns < 10 ? 2 : 1) + "x)";
}

}  // namespace gpumem::bench
