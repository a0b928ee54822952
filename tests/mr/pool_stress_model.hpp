// The model-based harness of the pool stress test (pool_stress_test.cpp's file comment describes
// the model): seeded random steps on three streams, stream gates, pattern checks in stream order,
// and check_invariants() after every step. Each step of run() is one pool operation; validating
// builds (GPUMEM_VALIDATE) also check after every operation of the teardown (finish()), where the
// other builds check once at the end.
#pragma once

#include "pool_stress_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace gpumem::pool_stress_detail {

struct stress_report {
  int model_violations = 0;
  int pattern_mismatches = 0;
  int checked_frees = 0;    // frees whose pattern was verified in stream order
  int unchecked_frees = 0;  // frees left unchecked because the staging region was full
  std::size_t upstream_peak = 0;
  std::size_t staging_peak = 0;
  std::uint64_t stream_waits = 0;  // misses the pool served from another stream's memory
  std::string first_problem;
};

class pool_stress {
 public:
  static constexpr int stream_count = 3;

  // Taken before the first gate (see the file comment). The upstream region is several times the
  // pool's peak in these runs, the staging region several times the checks in flight.
  static constexpr std::size_t upstream_bytes = 2 * GiB;
  static constexpr std::size_t staging_bytes = 1 * GiB;

  // wait_across_streams: the pool's option of that name (the model follows the waits it makes).
  pool_stress(std::uint64_t seed, device_backend* pool_backend, bool wait_across_streams = false)
      : rng_(seed),
        upstream_(upstream_bytes),
        staging_base_(backend().allocate_pinned(staging_bytes, {})),
        staging_carver_(staging_base_, staging_bytes),
        spy_(pool_backend != nullptr ? *pool_backend : backend(), *this) {
    pool_options options;
    options.backend = &spy_;
    options.track_blocks = true;
    options.chunk_size = 16 * MiB;
    options.fence_bytes = 2 * MiB;                 // fences often
    options.thread_cache_class_bytes = 256 * KiB;  // caches overflow often
    options.max_cached_size = 4 * MiB;             // the merged classes (1 MiB up) cached too
    options.wait_across_streams = wait_across_streams;
    pool_ = std::make_unique<pool_resource>(upstream_, options);
    for (auto& s : streams_)
      s.handle = backend().create_stream(true);
  }

  ~pool_stress() {
    finish();
    for (auto& s : streams_)
      backend().destroy_stream(s.handle);
    for (event_handle e : events_)
      backend().destroy_event(e);
    backend().deallocate_pinned(staging_base_);
  }

  stress_report run(int steps) {
    watchdog guard(progress_);
    for (int step = 0; step < steps; ++step) {
      step_ = step;
      progress_.store(step);
      unsigned const op = static_cast<unsigned>(rng_() % 100);
      if (op < 36 && live_.size() < 200)
        allocate();
      else if (op < 68 && !live_.empty())
        free_one();
      else if (op < 80)
        current_ = static_cast<int>(rng_() % stream_count);
      else if (op < 88)
        close_gate();
      else if (op < 97)
        open_gate();
      else if (!any_gate_closed())  // trim() may wait for the device
        pool_->trim();
      pool_->check_invariants();
      reap();
    }
    std::uint64_t const stream_waits = pool_->statistics().stream_waits;
    finish();
    stress_report report;
    report.stream_waits = stream_waits;
    report.model_violations = violations_;
    report.pattern_mismatches = mismatches_->load();
    report.checked_frees = checked_frees_;
    report.unchecked_frees = unchecked_frees_;
    report.upstream_peak = upstream_.peak();
    report.staging_peak = staging_carver_.peak();
    std::lock_guard<std::mutex> lock(*problem_mutex_);
    report.first_problem = first_problem_.empty() ? *pattern_problem_ : first_problem_;
    return report;
  }

 private:
  struct gate_state {
    stream_handle handle = nullptr;
    std::vector<std::shared_ptr<std::promise<void>>> gates;  // in queue order
    std::size_t opened = 0;                                  // gates [0, opened) are open
  };
  struct dependency {
    int stream;
    std::size_t gates;  // pending while opened < gates
  };
  struct pending_free {
    std::uintptr_t addr;
    std::size_t bytes;
    int stream;
    std::vector<dependency> deps;
  };
  struct live_block {
    void* p;
    std::size_t bytes;
    int stream;  // where its work was queued
    std::uint8_t pattern;
  };
  struct staging {
    void* host;
    std::size_t bytes;
    std::shared_ptr<std::atomic<bool>> done;
  };

  // The pool's own orderings (pool_options::wait_across_streams): a stream it makes wait for an
  // event runs its later work after what the event's stream had queued at the record, as after
  // the test's own waits. Calls come from the test thread, inside pool operations.
  class ordering_spy final : public test::forwarding_backend {
   public:
    ordering_spy(device_backend& inner, pool_stress& model)
        : forwarding_backend(inner), model_(model) {}
    void record_event(event_handle event, stream_handle stream) override {
      inner_.record_event(event, stream);
      int const at = model_.index_of(stream);
      if (at < 0) return;
      recorded_[event] = {at, model_.streams_[at].gates.size()};
      std::copy(std::begin(model_.after_[at]), std::end(model_.after_[at]),
                std::begin(recorded_[event].after));
    }
    void stream_wait_event(stream_handle stream, event_handle event) override {
      inner_.stream_wait_event(stream, event);
      int const at = model_.index_of(stream);
      auto const it = recorded_.find(event);
      if (at < 0 || it == recorded_.end()) return;
      model_.follow(at, it->second.stream, it->second.gates, it->second.after);
    }

   private:
    struct snapshot {
      int stream = 0;
      std::size_t gates = 0;
      std::size_t after[stream_count] = {};
    };
    pool_stress& model_;
    std::map<event_handle, snapshot> recorded_;
  };

  int index_of(stream_handle handle) const {
    for (int i = 0; i < stream_count; ++i)
      if (streams_[i].handle == handle) return i;
    return -1;
  }
  // Work queued from now on on stream x runs after the first `gates` gates of stream y and after
  // everything y's work ran after then (`y_after`).
  void follow(int x, int y, std::size_t gates, std::size_t const (&y_after)[stream_count]) {
    for (int z = 0; z < stream_count; ++z)
      after_[x][z] = std::max(after_[x][z], y_after[z]);
    after_[x][y] = std::max(after_[x][y], gates);
  }

  bool pending(pending_free const& f) const {
    for (auto const& d : f.deps)
      if (streams_[d.stream].opened < d.gates) return true;
    return false;
  }
  // Whether work queued now on `stream` may still run before the work `f` depends on.
  bool hazard_for(pending_free const& f, int stream) const {
    for (auto const& d : f.deps)
      if (d.stream != stream && streams_[d.stream].opened < d.gates &&
          after_[stream][d.stream] < d.gates)
        return true;
    return false;
  }

  void problem(std::string text) {
    ++violations_;
    if (first_problem_.empty()) first_problem_ = "step " + std::to_string(step_) + ": " + text;
  }

  void allocate() {
    double const lg = std::log(256.0) + std::uniform_real_distribution<double>(0, 1)(rng_) *
                                            (std::log(8.0 * MiB) - std::log(256.0));
    std::size_t const bytes = static_cast<std::size_t>(std::exp(lg));
    gate_state& s = streams_[current_];
    void* p = pool_->allocate(bytes, s.handle);
    auto const a = reinterpret_cast<std::uintptr_t>(p);
    // Drop frees that have completed, then look for a pending one of another stream under p.
    std::vector<pending_free> still;
    for (auto& f : pending_)
      if (pending(f)) still.push_back(f);
    pending_.swap(still);
    for (auto const& f : pending_)
      if (f.addr < a + bytes && a < f.addr + f.bytes && hazard_for(f, current_)) {
        std::ostringstream text;
        text << "block of " << bytes << " B handed to stream " << current_
             << " overlaps a block freed on stream " << f.stream << " whose work is still pending";
        problem(text.str());
        break;
      }
    auto const pattern = static_cast<std::uint8_t>(1 + serial_++ % 255);
    backend().fill_async(p, pattern, bytes, s.handle);
    live_.push_back({p, bytes, current_, pattern});
  }

  void free_one() {
    std::size_t const k = static_cast<std::size_t>(rng_() % live_.size());
    live_block const b = live_[k];
    live_[k] = live_.back();
    live_.pop_back();
    gate_state& s = streams_[current_];
    pending_free f{reinterpret_cast<std::uintptr_t>(b.p), b.bytes, current_, {}};
    f.deps.push_back({current_, s.gates.size()});
    if (b.stream != current_) {
      // As a correct caller does: the freeing stream first waits for the block's own stream.
      event_handle e = backend().create_event(false);
      events_.push_back(e);
      backend().record_event(e, streams_[b.stream].handle);
      backend().stream_wait_event(s.handle, e);
      // From now on, work on this stream runs after the block's stream's gates queued so far.
      follow(current_, b.stream, streams_[b.stream].gates.size(), after_[b.stream]);
      f.deps.push_back({b.stream, streams_[b.stream].gates.size()});
    }
    void* host = staging_carver_.take(b.bytes);
    if (host == nullptr) {
      // Too many checks in flight: this free goes unchecked (the model still checks it).
      ++unchecked_frees_;
      pool_->deallocate(b.p, b.bytes, s.handle);
      pending_.push_back(std::move(f));
      return;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    backend().copy_async(host, b.p, b.bytes, s.handle);
    auto mismatches = mismatches_;
    auto mutex = problem_mutex_;
    auto text = pattern_problem_;
    std::size_t const bytes = b.bytes;
    std::uint8_t const pattern = b.pattern;
    int const at_step = step_;
    backend().enqueue_host_function(s.handle, [=] {
      auto const* data = static_cast<std::uint8_t const*>(host);
      for (std::size_t i = 0; i < bytes; ++i) {
        if (data[i] != pattern) {
          mismatches->fetch_add(1);
          std::lock_guard<std::mutex> lock(*mutex);
          if (text->empty())
            *text = "block of " + std::to_string(bytes) + " B freed at step " +
                    std::to_string(at_step) + " was overwritten before its free completed (byte " +
                    std::to_string(i) + ")";
          break;
        }
      }
      done->store(true);
    });
    staging_.push_back({host, b.bytes, done});
    ++checked_frees_;
    pool_->deallocate(b.p, b.bytes, s.handle);
    pending_.push_back(std::move(f));
  }

  void close_gate() {
    gate_state& s = streams_[current_];
    if (s.gates.size() - s.opened >= 2) return;
    auto gate = std::make_shared<std::promise<void>>();
    auto opened = gate->get_future().share();
    backend().enqueue_host_function(s.handle, [opened] { opened.wait(); });
    s.gates.push_back(gate);
  }

  bool any_gate_closed() const {
    for (auto const& s : streams_)
      if (s.opened < s.gates.size()) return true;
    return false;
  }

  void open_gate() {
    std::vector<int> closed;
    for (int i = 0; i < stream_count; ++i)
      if (streams_[i].opened < streams_[i].gates.size()) closed.push_back(i);
    if (closed.empty()) return;
    gate_state& s = streams_[closed[rng_() % closed.size()]];
    s.gates[s.opened++]->set_value();
  }

  void reap() {
    std::vector<staging> keep;
    for (auto& st : staging_) {
      if (st.done->load())
        staging_carver_.give(st.host, st.bytes);
      else
        keep.push_back(st);
    }
    staging_.swap(keep);
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    for (auto& s : streams_)
      while (s.opened < s.gates.size())
        s.gates[s.opened++]->set_value();
    for (auto& b : live_) {
      pool_->deallocate(b.p, b.bytes, streams_[b.stream].handle);
      if constexpr (GPUMEM_VALIDATE != 0) pool_->check_invariants();
    }
    live_.clear();
    backend().synchronize();
    reap();
    for (auto& s : streams_) {
      pool_->release_stream(s.handle);
      if constexpr (GPUMEM_VALIDATE != 0) pool_->check_invariants();
    }
    pool_->check_invariants();
    pool_.reset();
  }

  std::mt19937_64 rng_;
  region_upstream upstream_;
  void* staging_base_;
  region_carver staging_carver_;
  std::atomic<int> progress_{0};
  int checked_frees_ = 0;
  int unchecked_frees_ = 0;
  ordering_spy spy_;  // the pool's backend
  std::unique_ptr<pool_resource> pool_;
  gate_state streams_[stream_count];
  // after_[x][y]: work queued now on stream x runs after the first after_[x][y] gates of stream y.
  std::size_t after_[stream_count][stream_count] = {};
  int current_ = 0;
  int step_ = 0;
  unsigned serial_ = 0;
  bool finished_ = false;
  std::vector<live_block> live_;
  std::vector<pending_free> pending_;
  std::vector<staging> staging_;
  std::vector<event_handle> events_;
  int violations_ = 0;
  std::string first_problem_;
  std::shared_ptr<std::atomic<int>> mismatches_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::mutex> problem_mutex_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::string> pattern_problem_ = std::make_shared<std::string>();
};

}  // namespace gpumem::pool_stress_detail
