// Replay of parsed allocation logs against a memory resource (see log_replay.hpp); the parsing is
// in log_parse.cpp.
#include "resource_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/mr/log_replay.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpumem {

namespace {

// Streams of the replay: one per logged stream, created on first use, on the backend of the
// resource replayed (memory_resource::backend_in_use): a stream of another backend means nothing
// to it (its stream-ordered frees would be refused, and the blocks leak).
class replay_streams {
 public:
  replay_streams(device_backend& backend, bool honour, std::vector<stream_handle> const& given)
      : backend_(backend), honour_(honour), given_(given) {}
  ~replay_streams() {
    if (!given_.empty()) return;
    for (auto& entry : streams_) {
      try {
        backend_.destroy_stream(entry.second);
      } catch (...) {
      }
    }
  }
  replay_streams(replay_streams const&) = delete;
  replay_streams& operator=(replay_streams const&) = delete;

  stream_handle get(std::uintptr_t logged) {
    if (!honour_ || logged == 0) return nullptr;
    auto it = streams_.find(logged);
    if (it != streams_.end()) return it->second;
    stream_handle s =
        given_.empty() ? backend_.create_stream(true) : given_[streams_.size() % given_.size()];
    streams_.emplace(logged, s);
    return s;
  }
  void synchronize_all() {
    backend_.synchronize_stream(nullptr);
    for (auto& entry : streams_)
      backend_.synchronize_stream(entry.second);
  }

 private:
  device_backend& backend_;
  bool honour_;
  std::vector<stream_handle> const& given_;
  std::unordered_map<std::uintptr_t, stream_handle> streams_;
};

struct live_block {
  void* pointer = nullptr;  // null: not allocated (yet, any more, or the allocation failed)
  std::size_t size = 0;
  stream_handle stream = nullptr;
};

// The replay as a program over slots, made before the timed loop so that the loop times the
// resource and not the replay's own bookkeeping: each logged pointer's lifetime gets a slot (reused
// once it is freed), and each step names its slot and its stream. Looking pointers up in a hash
// table and creating streams on first use cost more than a pool's allocate+free pair.
struct replay_step {
  enum class kind : unsigned char {
    allocate,
    free,
    // The log allocates a live pointer again (a truncated or merged log): the earlier block is
    // freed, so that the replay does not leak.
    free_stale,
  };
  kind what;
  std::size_t slot;
  std::size_t size;  // allocate: the bytes asked for
  stream_handle stream;
  std::size_t event;  // its index in the log
};

struct replay_program {
  std::vector<replay_step> steps;
  std::size_t slots = 0;
  std::size_t logged_failures = 0;
  std::size_t unmatched_frees = 0;  // frees of pointers the log never allocated
};

replay_program compile(std::vector<log_event> const& events, replay_streams& streams) {
  replay_program program;
  std::unordered_map<std::uintptr_t, std::size_t> slot_of;  // live logged pointer -> slot
  std::vector<std::size_t> spare;
  program.steps.reserve(events.size());
  auto const release = [&](std::unordered_map<std::uintptr_t, std::size_t>::iterator it) {
    spare.push_back(it->second);
    slot_of.erase(it);
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    log_event const& e = events[i];
    if (e.action == log_action::allocate_failure) {
      ++program.logged_failures;
      continue;
    }
    if (e.pointer == 0 || (e.action == log_action::allocate && e.size == 0)) continue;
    auto const it = slot_of.find(e.pointer);
    stream_handle const stream = streams.get(e.stream);
    if (e.action == log_action::free) {
      if (it == slot_of.end()) {
        ++program.unmatched_frees;
        continue;
      }
      program.steps.push_back({replay_step::kind::free, it->second, 0, stream, i});
      release(it);
      continue;
    }
    if (it != slot_of.end()) {
      program.steps.push_back({replay_step::kind::free_stale, it->second, 0, nullptr, i});
      release(it);
    }
    std::size_t slot = program.slots;
    if (spare.empty()) {
      ++program.slots;
    } else {
      slot = spare.back();
      spare.pop_back();
    }
    slot_of.emplace(e.pointer, slot);
    program.steps.push_back({replay_step::kind::allocate, slot, e.size, stream, i});
  }
  return program;
}

// One thread per logged thread (replay_options::honour_threads). run() hands a piece of work to
// the thread of a logged id (started on first use) and waits for it: the threads take turns, so the
// replay stays one event after another in log order, and the hand-over (under one mutex) orders
// every thread's changes to the replay's state before the next one's. Each thread sleeps on a
// condition variable of its own, and the caller on another, so that a hand-over wakes exactly the
// thread whose turn it is: with one variable for all, every hand-over woke every thread (64
// threads made a replay of 8000 events take seconds instead of milliseconds).
class replay_threads {
 public:
  replay_threads() = default;
  replay_threads(replay_threads const&) = delete;
  replay_threads& operator=(replay_threads const&) = delete;
  ~replay_threads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    for (auto& w : workers_)
      w->wake.notify_one();
    for (auto& w : workers_)
      w->thread.join();
  }

  // Runs `work` on the thread of `logged` and rethrows what it threw.
  void run(std::uint64_t logged, std::function<void()> const& work) {
    worker& w = worker_of(logged);
    std::unique_lock<std::mutex> lock(mutex_);
    work_ = &work;
    runner_ = &w;
    w.wake.notify_one();
    done_.wait(lock, [&] { return work_ == nullptr; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct worker {
    std::condition_variable wake;  // its turn has come (or the replay is over)
    std::thread thread;
  };

  worker& worker_of(std::uint64_t logged) {
    auto const it = index_.find(logged);
    if (it != index_.end()) return *it->second;
    workers_.push_back(std::make_unique<worker>());
    worker& w = *workers_.back();
    try {
      w.thread = std::thread([this, &w] { serve(w); });
    } catch (...) {
      workers_.pop_back();  // no thread: the destructor must not join it
      throw;
    }
    index_.emplace(logged, &w);
    return w;
  }

  void serve(worker& self) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      self.wake.wait(lock, [&] { return stopping_ || (work_ != nullptr && runner_ == &self); });
      if (stopping_) return;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*work_)();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      work_ = nullptr;
      runner_ = nullptr;
      done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable done_;                 // the caller's: the piece of work has run
  std::function<void()> const* work_ = nullptr;  // under mutex_: the piece of work to run
  worker* runner_ = nullptr;                     // under mutex_: the thread that runs it
  bool stopping_ = false;
  std::exception_ptr error_;
  std::unordered_map<std::uint64_t, worker*> index_;
  std::vector<std::unique_ptr<worker>> workers_;  // stable addresses: threads keep theirs
};

bool several_threads(std::vector<log_event> const& events) {
  for (log_event const& e : events)
    if (e.thread != events.front().thread) return true;
  return false;
}

}  // namespace

replay_result replay(std::vector<log_event> const& events, memory_resource& resource,
                     replay_options const& options) {
  replay_result result;
  replay_streams streams(detail::backend_of(resource), options.honour_streams, options.streams);
  replay_program const program = compile(events, streams);
  result.events = events.size();
  result.logged_failures = program.logged_failures;
  result.unmatched_frees = program.unmatched_frees;
  std::vector<live_block> live(program.slots);
  std::size_t live_bytes = 0;
  auto sample_held = [&] {
    if (options.held_bytes)
      result.peak_held_bytes = std::max(result.peak_held_bytes, options.held_bytes());
  };

  // One step; false once the replay must stop (an out-of-memory with stop_on_out_of_memory).
  std::exception_ptr stopped_by;
  auto const step = [&](replay_step const& s) -> bool {
    live_block& block = live[s.slot];
    if (s.what == replay_step::kind::allocate) {
      void* p = nullptr;
      try {
        p = resource.allocate(s.size, s.stream);
      } catch (out_of_memory const&) {
        ++result.out_of_memory;
        if (!options.stop_on_out_of_memory) return true;
        stopped_by = std::current_exception();
        return false;
      }
      ++result.allocations;
      block = live_block{p, s.size, s.stream};
      live_bytes += s.size;
      result.peak_live_bytes = std::max(result.peak_live_bytes, live_bytes);
      sample_held();
      return true;
    }
    if (block.pointer == nullptr) {  // its allocation failed
      if (s.what == replay_step::kind::free) ++result.unmatched_frees;
      return true;
    }
    if (s.what == replay_step::kind::free) {
      // The size allocated, not the logged one: a resource must get back what it handed out.
      resource.deallocate(block.pointer, block.size, s.stream);
      ++result.frees;
    } else {
      resource.deallocate(block.pointer, block.size, block.stream);
      ++result.unmatched_frees;
    }
    live_bytes -= block.size;
    block.pointer = nullptr;
    if (s.what == replay_step::kind::free) sample_held();
    return true;
  };

  std::vector<replay_step> const& steps = program.steps;
  using clock = std::chrono::steady_clock;
  // Anything else thrown (by the resource, held_bytes, a thread the replay starts) stops the
  // replay as an out-of-memory does: what it allocated is freed below before the exception is
  // rethrown, or it would leak (nobody else holds those pointers).
  try {
    if (options.honour_threads && !events.empty() && several_threads(events)) {
      // Each run of consecutive steps of one logged thread goes to that thread at once, and is
      // timed there: the hand-overs between threads are not the resource's time.
      replay_threads threads;
      auto const thread_of = [&](std::size_t at) { return events[steps[at].event].thread; };
      for (std::size_t at = 0; at < steps.size() && !stopped_by;) {
        std::size_t end = at + 1;
        while (end < steps.size() && thread_of(end) == thread_of(at))
          ++end;
        std::function<void()> const run = [&, at, end] {
          auto const start = clock::now();
          for (std::size_t i = at; i < end && step(steps[i]); ++i) {
          }
          result.seconds += std::chrono::duration<double>(clock::now() - start).count();
        };
        threads.run(thread_of(at), run);
        at = end;
      }
    } else {
      auto const start = clock::now();
      for (replay_step const& s : steps)
        if (!step(s)) break;
      result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    }
  } catch (...) {
    stopped_by = std::current_exception();
  }
  for (live_block const& block : live) {
    if (block.pointer == nullptr) continue;
    ++result.leftover_allocations;
    if (options.free_leftovers) resource.deallocate(block.pointer, block.size, block.stream);
  }
  if (options.free_leftovers) streams.synchronize_all();
  if (stopped_by) std::rethrow_exception(stopped_by);
  return result;
}

}  // namespace gpumem
