// Model-based stress test of pool_resource (CONVENTIONS.md §13): seeded random allocate / free /
// stream switch / stream gate / gate open ("event complete") / trim steps on three streams, with
// check_invariants() after every step and every block filled with a pattern that is checked, in
// stream order, when the block is freed.
//
// The model knows exactly which work is still pending: a stream gate is a host function that
// blocks its stream until the test opens it. A free on stream S is pending while a gate queued on
// S (or on the stream the block was used on) before the free is still closed; handing any part of
// that block to another stream then is a violation, whatever the timing. The pattern check finds
// the same bug as data corruption. The last test breaks the ordering on purpose (a backend that
// says every event and stream has completed) and shows that the harness catches it.
//
// No deadlock on CUDA, by construction: while a gate is closed, the test thread (the only one that
// opens gates) must never call anything that waits for the device. cudaFree and cudaFreeHost wait
// for the whole device, so the pool's upstream and the pinned staging memory are carved from
// regions taken before the first gate and given back after the last one opens; the pool itself
// waits only on its out-of-memory path, which the large upstream region keeps it from reaching.
// Host functions never wait for each other's streams (CUDA may run them all on one thread), only
// for the test thread. A watchdog turns a hang into a failure that names the step.
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

// Forwards everything to another backend, but claims that every event and stream has completed
// (and never waits): a pool built on it reuses memory across streams too early.
class lying_backend final : public device_backend {
 public:
  explicit lying_backend(device_backend& inner) : inner_(inner) {}
  backend_kind kind() const noexcept override { return inner_.kind(); }
  std::string description() override { return inner_.description(); }
  int device_count() override { return inner_.device_count(); }
  int current_device() override { return inner_.current_device(); }
  void set_current_device(int ordinal) override { inner_.set_current_device(ordinal); }
  device_identity identity(int ordinal) override { return inner_.identity(ordinal); }
  memory_info get_memory_info() override { return inner_.get_memory_info(); }
  void synchronize() override { inner_.synchronize(); }
  void* allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr) override { inner_.deallocate(ptr); }
  void* allocate_async(std::size_t bytes, stream_handle stream) override {
    return inner_.allocate_async(bytes, stream);
  }
  void deallocate_async(void* ptr, stream_handle stream) override {
    inner_.deallocate_async(ptr, stream);
  }
  std::size_t set_async_release_threshold(std::size_t bytes) override {
    return inner_.set_async_release_threshold(bytes);
  }
  void trim_async_pool(std::size_t keep_bytes) override { inner_.trim_async_pool(keep_bytes); }
  void* allocate_managed(std::size_t bytes, bool attach_global) override {
    return inner_.allocate_managed(bytes, attach_global);
  }
  void deallocate_managed(void* ptr) override { inner_.deallocate_managed(ptr); }
  void* allocate_pinned(std::size_t bytes, host_alloc_flags flags) override {
    return inner_.allocate_pinned(bytes, flags);
  }
  void deallocate_pinned(void* ptr) override { inner_.deallocate_pinned(ptr); }
  void register_host(void* ptr, std::size_t bytes, bool mapped, bool portable) override {
    inner_.register_host(ptr, bytes, mapped, portable);
  }
  void unregister_host(void* ptr) override { inner_.unregister_host(ptr); }
  void* mapped_device_pointer(void* host_ptr) override {
    return inner_.mapped_device_pointer(host_ptr);
  }
  void copy(void* dst, void const* src, std::size_t bytes) override {
    inner_.copy(dst, src, bytes);
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) override {
    inner_.copy_async(dst, src, bytes, stream);
  }
  void fill(void* dst, int value, std::size_t bytes) override { inner_.fill(dst, value, bytes); }
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    inner_.fill_async(dst, value, bytes, stream);
  }
  stream_handle create_stream(bool non_blocking) override {
    return inner_.create_stream(non_blocking);
  }
  void destroy_stream(stream_handle stream) override { inner_.destroy_stream(stream); }
  void synchronize_stream(stream_handle stream) override { inner_.synchronize_stream(stream); }
  bool query_stream(stream_handle stream) override {
    inner_.query_stream(stream);
    return true;
  }
  stream_handle per_thread_default_stream() override { return inner_.per_thread_default_stream(); }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    inner_.enqueue_host_function(stream, fn);
  }
  event_handle create_event(bool timing) override { return inner_.create_event(timing); }
  void destroy_event(event_handle event) override { inner_.destroy_event(event); }
  void record_event(event_handle event, stream_handle stream) override {
    inner_.record_event(event, stream);
  }
  bool query_event(event_handle event) override {
    inner_.query_event(event);
    return true;
  }
  void synchronize_event(event_handle) override {}
  void stream_wait_event(stream_handle stream, event_handle event) override {
    inner_.stream_wait_event(stream, event);
  }
  float elapsed_ms(event_handle start, event_handle stop) override {
    return inner_.elapsed_ms(start, stop);
  }
  address_range get_address_range(void const* ptr) override {
    return inner_.get_address_range(ptr);
  }
  ipc_memory_handle ipc_get_handle(void* allocation_base) override {
    return inner_.ipc_get_handle(allocation_base);
  }
  void* ipc_open(ipc_memory_handle const& handle) override { return inner_.ipc_open(handle); }
  void ipc_close(void* ptr) override { inner_.ipc_close(ptr); }

 private:
  device_backend& inner_;
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

struct stress_report {
  int model_violations = 0;
  int pattern_mismatches = 0;
  int checked_frees = 0;    // frees whose pattern was verified in stream order
  int unchecked_frees = 0;  // frees left unchecked because the staging region was full
  std::size_t upstream_peak = 0;
  std::size_t staging_peak = 0;
  std::string first_problem;
};

class pool_stress {
 public:
  static constexpr int stream_count = 3;

  // Taken before the first gate (see the file comment). The upstream region is several times the
  // pool's peak in these runs, the staging region several times the checks in flight.
  static constexpr std::size_t upstream_bytes = 2 * GiB;
  static constexpr std::size_t staging_bytes = 1 * GiB;

  pool_stress(std::uint64_t seed, device_backend* pool_backend)
      : rng_(seed),
        upstream_(upstream_bytes),
        staging_base_(backend().allocate_pinned(staging_bytes, {})),
        staging_carver_(staging_base_, staging_bytes) {
    pool_options options;
    options.backend = pool_backend;
    options.track_blocks = true;
    options.chunk_size = 16 * MiB;
    options.fence_bytes = 2 * MiB;                 // fences often
    options.thread_cache_class_bytes = 256 * KiB;  // caches overflow often
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
      else
        pool_->trim();
      pool_->check_invariants();
      reap();
    }
    finish();
    stress_report report;
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
      for (int z = 0; z < stream_count; ++z)
        after_[current_][z] = std::max(after_[current_][z], after_[b.stream][z]);
      after_[current_][b.stream] =
          std::max(after_[current_][b.stream], streams_[b.stream].gates.size());
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
    for (auto& b : live_)
      pool_->deallocate(b.p, b.bytes, streams_[b.stream].handle);
    live_.clear();
    backend().synchronize();
    reap();
    for (auto& s : streams_)
      pool_->release_stream(s.handle);
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

class pool_stress_seeds : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(pool_stress_seeds, no_cross_stream_reuse_before_completion_and_patterns_intact) {
  pool_stress stress(GetParam(), nullptr);
  stress_report const report = stress.run(1500);
  EXPECT_EQ(report.model_violations, 0) << report.first_problem;
  EXPECT_EQ(report.pattern_mismatches, 0) << report.first_problem;
  EXPECT_GT(report.checked_frees, 4 * report.unchecked_frees) << "the staging region is too small";
  std::printf("%d frees checked, %d unchecked; peak upstream %zu MiB, peak staging %zu MiB\n",
              report.checked_frees, report.unchecked_frees, report.upstream_peak / MiB,
              report.staging_peak / MiB);
}

INSTANTIATE_TEST_SUITE_P(seeds, pool_stress_seeds, ::testing::Values(1u, 2u, 3u, 42u));

TEST(pool_stress, catches_a_pool_whose_stream_ordering_is_broken) {
  lying_backend liar(backend());
  pool_stress stress(1, &liar);
  stress_report const report = stress.run(1500);
  EXPECT_GT(report.model_violations, 0)
      << "the harness did not notice blocks reused across streams before their frees completed";
  std::printf("broken ordering caught: %d model violations, %d corrupted patterns; first: %s\n",
              report.model_violations, report.pattern_mismatches, report.first_problem.c_str());
}

}  // namespace
}  // namespace gpumem
