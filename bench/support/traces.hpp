// Allocation traces for bench_alloc: one trace per thread, replayed on its own stream.
//
//   random_trace      sizes log-uniform in [min, max], up to max_live blocks live, each free of a
//                     random live block (the small, mixed and large traces);
//   training_loop     a transformer-like training loop whose batch size and sequence length
//                     change every step: weights, gradients and optimizer state live throughout;
//                     each step saves activations layer by layer and frees them in reverse order
//                     in the backward pass, with temporaries and small tensors in between;
//   inference_loop    a transformer-like inference server: weights live throughout; each request
//                     (batch and prompt length vary) takes a KV cache for its whole length, runs
//                     the prompt through the layers (two activations live at a time) and then
//                     decodes token by token (small tensors).
//
// Every generator is seeded and deterministic; `fraction` scales the number of pairs (slow
// competitors replay a shortened trace; the time is per pair either way).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace gpumem::bench {

struct trace_op {
  std::uint32_t size;   // allocate `size` bytes (free: 0)
  std::uint32_t index;  // free: the live block at this index (swapped with the last)
};

struct trace {
  std::vector<trace_op> ops;
  std::size_t pairs = 0;
  std::size_t peak_live_bytes = 0;  // as requested
};

// Builds a trace from allocations and frees named by id: a free refers to the live block's index in
// the replayer's live list (kept as the replayer keeps it: the last block moves into the hole).
class trace_builder {
 public:
  std::uint64_t allocate(std::size_t bytes) {
    std::uint64_t const id = next_id_++;
    position_[id] = live_.size();
    live_.push_back({id, bytes});
    t_.ops.push_back({static_cast<std::uint32_t>(bytes), 0});
    live_bytes_ += bytes;
    t_.peak_live_bytes = std::max(t_.peak_live_bytes, live_bytes_);
    ++t_.pairs;
    return id;
  }
  void free(std::uint64_t id) {
    auto const it = position_.find(id);
    std::size_t const at = it->second;
    position_.erase(it);
    t_.ops.push_back({0, static_cast<std::uint32_t>(at)});
    live_bytes_ -= live_[at].bytes;
    live_[at] = live_.back();
    live_.pop_back();
    if (at < live_.size()) position_[live_[at].id] = at;
  }
  // The index form frees by position: a random live block.
  void free_at(std::size_t at) { free(live_[at].id); }
  std::size_t live_count() const { return live_.size(); }
  trace finish() {
    while (!live_.empty())
      free(live_.back().id);
    return std::move(t_);
  }

 private:
  struct block {
    std::uint64_t id;
    std::size_t bytes;
  };
  trace t_;
  std::vector<block> live_;
  std::unordered_map<std::uint64_t, std::size_t> position_;
  std::size_t live_bytes_ = 0;
  std::uint64_t next_id_ = 1;
};

inline trace random_trace(std::uint64_t seed, std::size_t min_bytes, std::size_t max_bytes,
                          std::size_t pairs, std::size_t max_live) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double const lo = std::log(static_cast<double>(min_bytes));
  double const hi = std::log(static_cast<double>(max_bytes));
  trace_builder b;
  std::size_t allocated = 0;
  while (allocated < pairs) {
    std::size_t const live = b.live_count();
    bool const alloc =
        live == 0 || (live < max_live && (allocated < max_live / 2 || rng() % 2 == 0));
    if (alloc) {
      b.allocate(static_cast<std::size_t>(std::exp(lo + unit(rng) * (hi - lo))));
      ++allocated;
    } else {
      b.free_at(static_cast<std::size_t>(rng() % live));
    }
  }
  return b.finish();
}

namespace loop_detail {

constexpr std::size_t f32 = 4;
constexpr std::size_t hidden = 512, ffn = 2048, heads = 4, layers = 6;

struct layer_weights {
  std::uint64_t qkv, out, ffn1, ffn2, norm1, norm2;
};

inline std::vector<layer_weights> allocate_weights(trace_builder& b) {
  std::vector<layer_weights> w(layers);
  for (auto& l : w)
    l = {b.allocate(3 * hidden * hidden * f32),
         b.allocate(hidden * hidden * f32),
         b.allocate(hidden * ffn * f32),
         b.allocate(ffn * hidden * f32),
         b.allocate(hidden * f32),
         b.allocate(hidden * f32)};
  return w;
}

}  // namespace loop_detail

// Steps of the training loop: about 115 allocations per step, from 4 bytes to 32 MiB; batch in
// [4, 16] and sequence length in [32, 256], drawn anew each step (about 0.75 GiB live at the peak).
inline trace training_loop(std::uint64_t seed, std::size_t steps) {
  using namespace loop_detail;
  std::mt19937_64 rng(seed);
  trace_builder b;
  auto const weights = allocate_weights(b);
  std::vector<layer_weights> grads, adam_m, adam_v;  // made at the first step, as frameworks do
  for (std::size_t step = 0; step < steps; ++step) {
    std::size_t const batch = 4 + rng() % 13;
    std::size_t const seq = 32 + rng() % 225;
    std::size_t const tokens = batch * seq;
    std::uint64_t const ids = b.allocate(tokens * 8);
    std::uint64_t x = b.allocate(tokens * hidden * f32);  // embeddings
    struct saved {
      std::uint64_t input, qkv, probs, attn, hidden1, act;
    };
    std::vector<saved> keep;
    for (std::size_t l = 0; l < layers; ++l) {
      saved s{};
      s.input = x;
      std::uint64_t const norm = b.allocate(tokens * hidden * f32);
      s.qkv = b.allocate(3 * tokens * hidden * f32);
      b.free(norm);
      std::uint64_t const scores = b.allocate(batch * heads * seq * seq * f32);
      s.probs = b.allocate(batch * heads * seq * seq * f32);
      b.free(scores);
      s.attn = b.allocate(tokens * hidden * f32);
      std::uint64_t const proj = b.allocate(tokens * hidden * f32);
      std::uint64_t const stats = b.allocate(tokens * 2 * f32);  // layer-norm statistics
      s.hidden1 = b.allocate(tokens * ffn * f32);
      s.act = b.allocate(tokens * ffn * f32);
      std::uint64_t const out = b.allocate(tokens * hidden * f32);
      b.free(proj);
      b.free(stats);
      keep.push_back(s);
      x = out;
    }
    std::uint64_t const logits = b.allocate(tokens * 1024 * f32);  // a small vocabulary head
    std::uint64_t const loss = b.allocate(f32);
    b.free(logits);
    std::uint64_t grad = b.allocate(tokens * hidden * f32);
    b.free(x);
    if (grads.empty()) {
      grads = allocate_weights(b);
      adam_m = allocate_weights(b);
      adam_v = allocate_weights(b);
    }
    for (std::size_t l = layers; l-- > 0;) {
      saved const& s = keep[l];
      std::uint64_t const d_act = b.allocate(tokens * ffn * f32);
      b.free(s.act);
      std::uint64_t const d_hidden = b.allocate(tokens * ffn * f32);
      b.free(s.hidden1);
      b.free(d_act);
      std::uint64_t const d_attn = b.allocate(tokens * hidden * f32);
      b.free(d_hidden);
      b.free(s.attn);
      std::uint64_t const d_probs = b.allocate(batch * heads * seq * seq * f32);
      b.free(s.probs);
      std::uint64_t const d_qkv = b.allocate(3 * tokens * hidden * f32);
      b.free(d_probs);
      b.free(s.qkv);
      b.free(d_attn);
      std::uint64_t const d_input = b.allocate(tokens * hidden * f32);
      b.free(d_qkv);
      b.free(grad);
      if (l > 0) b.free(s.input);  // layer 0's input is the embedding, freed below
      grad = d_input;
    }
    b.free(keep[0].input);
    b.free(grad);
    b.free(loss);
    b.free(ids);
    for (std::size_t l = 0; l < layers; ++l) {  // the optimizer's temporaries
      std::uint64_t const tmp = b.allocate(hidden * ffn * f32);
      std::uint64_t const norm = b.allocate(f32 * 2);
      b.free(norm);
      b.free(tmp);
    }
  }
  return b.finish();
}

// Requests of the inference loop: batch in [1, 16], prompt in [16, 512] tokens, 8-64 tokens
// generated; the KV cache of a request is sized for its prompt and output.
inline trace inference_loop(std::uint64_t seed, std::size_t requests) {
  using namespace loop_detail;
  std::mt19937_64 rng(seed);
  trace_builder b;
  auto const weights = allocate_weights(b);
  (void)weights;
  for (std::size_t r = 0; r < requests; ++r) {
    std::size_t const batch = 1 + rng() % 16;
    std::size_t const prompt = 16 + rng() % 497;
    std::size_t const generate = 8 + rng() % 57;
    std::size_t const total = prompt + generate;
    std::vector<std::uint64_t> cache;
    for (std::size_t l = 0; l < layers; ++l)
      cache.push_back(b.allocate(2 * batch * total * hidden * f32));
    std::uint64_t const ids = b.allocate(batch * prompt * 8);
    std::uint64_t x = b.allocate(batch * prompt * hidden * f32);
    for (std::size_t l = 0; l < layers; ++l) {  // prefill
      std::uint64_t const qkv = b.allocate(3 * batch * prompt * hidden * f32);
      std::uint64_t const scores = b.allocate(batch * heads * prompt * prompt * f32);
      std::uint64_t const attn = b.allocate(batch * prompt * hidden * f32);
      b.free(scores);
      b.free(qkv);
      std::uint64_t const h = b.allocate(batch * prompt * ffn * f32);
      std::uint64_t const out = b.allocate(batch * prompt * hidden * f32);
      b.free(h);
      b.free(attn);
      b.free(x);
      x = out;
    }
    b.free(x);
    b.free(ids);
    for (std::size_t t = 0; t < generate; ++t) {  // decode, one token at a time
      std::uint64_t y = b.allocate(batch * hidden * f32);
      for (std::size_t l = 0; l < layers; ++l) {
        std::uint64_t const qkv = b.allocate(3 * batch * hidden * f32);
        std::uint64_t const scores = b.allocate(batch * heads * (prompt + t + 1) * f32);
        std::uint64_t const h = b.allocate(batch * ffn * f32);
        std::uint64_t const out = b.allocate(batch * hidden * f32);
        b.free(scores);
        b.free(qkv);
        b.free(h);
        b.free(y);
        y = out;
      }
      std::uint64_t const logits = b.allocate(batch * 1024 * f32);
      b.free(logits);
      b.free(y);
    }
    for (std::uint64_t c : cache)
      b.free(c);
  }
  return b.finish();
}

}  // namespace gpumem::bench
