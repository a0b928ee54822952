// bench_alloc's cases: the traces it replays on 1, 4 and 16 threads (bench/support/traces.hpp),
// each with the length of its full run; a quick run (no GPU) scales them down.
#pragma once

#include "traces.hpp"

#include <gpumem/core/units.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpumem::bench {

struct case_spec {
  std::string name;
  // The trace of one thread: seed, and the fraction of the full length to generate.
  std::function<trace(std::uint64_t, double)> make;
  bool shaped = false;  // a loop with changing shapes: its memory held is a goal
};

inline std::vector<case_spec> make_cases(bool quick) {
  std::size_t const scale = quick ? 20 : 1;
  auto random = [](std::size_t lo, std::size_t hi, std::size_t pairs, std::size_t live) {
    return [=](std::uint64_t seed, double fraction) {
      auto const n = std::max<std::size_t>(
          50, static_cast<std::size_t>(static_cast<double>(pairs) * fraction));
      return random_trace(seed, lo, hi, n, live);
    };
  };
  auto steps = [](std::size_t full, double fraction) {
    return std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(full) * fraction));
  };
  return {
      {"small", random(256, 4 * KiB, 200000 / scale, quick ? 100u : 1000u)},
      {"mixed", random(1 * KiB, 4 * MiB, 200000 / scale, quick ? 64u : 1000u)},
      {"large", random(1 * MiB, 64 * MiB, 20000 / scale, quick ? 4u : 100u)},
      {"training",
       [=](std::uint64_t seed, double f) { return training_loop(seed, steps(160 / scale, f)); },
       true},
      {"inference",
       [=](std::uint64_t seed, double f) { return inference_loop(seed, steps(24 / scale, f)); },
       true},
  };
}

}  // namespace gpumem::bench
