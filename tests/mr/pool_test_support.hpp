// Shared by the pool_resource test files: the fixture with two streams over a cuda_resource, a
// stream gate closed at construction (work queued on the stream after it stays pending), an
// upstream that refuses on demand, and a seeded random workload of allocate/free pairs on one
// stream.
#pragma once

#include "../support/stream_gate.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::test {

class closed_gate : public stream_gate {
 public:
  explicit closed_gate(stream_handle stream) { block(stream); }
};

// An upstream that refuses every request while `refusing` is set, and those above
// `refuse_above`; `granted` lists the sizes it allocated.
class refusing_upstream final : public memory_resource {
 public:
  explicit refusing_upstream(memory_resource& inner) : inner_(inner) {}
  std::string name() const override { return "refusing_upstream"; }
  bool refusing = false;
  std::size_t refuse_above = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> granted;  // sizes of the allocations made

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    if (refusing || bytes > refuse_above)
      throw out_of_memory(bytes, name(), 0, 0, "refusing (test)");
    granted.push_back(bytes);
    return inner_.allocate(bytes, s);
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle s) noexcept override {
    inner_.deallocate(p, bytes, s);
  }
  memory_resource& inner_;
};

struct pool_test : ::testing::Test {
  cuda_resource upstream;
  stream_handle a = backend().create_stream(true);
  stream_handle b = backend().create_stream(true);
  ~pool_test() override {
    backend().destroy_stream(a);
    backend().destroy_stream(b);
  }
};

// Random allocate/free pairs on `stream`: each step allocates a block (sizes log-uniform over
// [min_bytes, max_bytes)) while fewer than max_live are live, at random once any is, and otherwise
// frees a random live block. The same seed gives the same steps. What is live is freed by
// free_all() or the destructor (the pool must outlive this).
class random_pairs {
 public:
  struct sizes {
    std::size_t min_bytes;
    std::size_t max_bytes;
    std::size_t max_live;
  };
  random_pairs(pool_resource& pool, stream_handle stream, std::uint64_t seed, sizes s)
      : pool_(pool),
        stream_(stream),
        rng_(seed),
        log_min_(std::log(static_cast<double>(s.min_bytes))),
        log_ratio_(std::log(static_cast<double>(s.max_bytes) / static_cast<double>(s.min_bytes))),
        max_live_(s.max_live) {}
  random_pairs(random_pairs const&) = delete;
  random_pairs& operator=(random_pairs const&) = delete;
  ~random_pairs() { free_all(); }

  void step() {
    if (live_.size() < max_live_ && (live_.empty() || rng_() % 2)) {
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      auto const bytes = static_cast<std::size_t>(std::exp(log_min_ + unit(rng_) * log_ratio_));
      live_.emplace_back(pool_.allocate(bytes, stream_), bytes);
      ++allocations_;
    } else {
      std::size_t const k = rng_() % live_.size();
      pool_.deallocate(live_[k].first, live_[k].second, stream_);
      live_[k] = live_.back();
      live_.pop_back();
      ++frees_;
    }
  }
  void free_all() {
    for (auto [p, bytes] : live_)
      pool_.deallocate(p, bytes, stream_);
    live_.clear();
  }
  std::size_t allocations() const noexcept { return allocations_; }
  std::size_t frees() const noexcept { return frees_; }

 private:
  pool_resource& pool_;
  stream_handle stream_;
  std::mt19937_64 rng_;
  double log_min_;
  double log_ratio_;
  std::size_t max_live_;
  std::vector<std::pair<void*, std::size_t>> live_;
  std::size_t allocations_ = 0;
  std::size_t frees_ = 0;
};

// `steps` steps of x and of y, in turn, on the calling thread.
inline void step_in_turn(random_pairs& x, random_pairs& y, int steps) {
  for (int i = 0; i < steps; ++i) {
    x.step();
    y.step();
  }
}

}  // namespace gpumem::test
