// Model-based stress test of pool_resource: seeded random allocate / free /
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
// regions taken before the first gate and given back after the last one opens. Of the pool's
// calls, only the out-of-memory path (which the large upstream region keeps it from reaching) and
// trim() wait for the device (trim: what created streams freed since their last fences is reached
// no other way): the model trims only while every gate is open. Host functions never wait for each
// other's streams (CUDA may run them all on one thread), only for the test thread. A watchdog turns
// a hang into a failure that names the step.
#include "pool_stress_model.hpp"

#include <gpumem/core/units.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <tuple>

namespace gpumem {
namespace {

using pool_stress_detail::lying_backend;
using pool_stress_detail::pool_stress;
using pool_stress_detail::stress_report;

// (seed, pool_options::wait_across_streams)
class pool_stress_seeds : public ::testing::TestWithParam<std::tuple<std::uint64_t, bool>> {};

TEST_P(pool_stress_seeds, no_cross_stream_reuse_before_completion_and_patterns_intact) {
  auto const [seed, wait_across_streams] = GetParam();
  pool_stress stress(seed, nullptr, wait_across_streams);
  stress_report const report = stress.run(1500);
  EXPECT_EQ(report.model_violations, 0) << report.first_problem;
  EXPECT_EQ(report.pattern_mismatches, 0) << report.first_problem;
  EXPECT_GT(report.checked_frees, 4 * report.unchecked_frees) << "the staging region is too small";
  if (wait_across_streams) {
    EXPECT_GT(report.stream_waits, 0u) << "no miss was served from another stream's memory";
  } else {
    EXPECT_EQ(report.stream_waits, 0u);
  }
  std::printf(
      "%d frees checked, %d unchecked; peak upstream %zu MiB, peak staging %zu MiB; %llu misses "
      "served from another stream's memory\n",
      report.checked_frees, report.unchecked_frees, report.upstream_peak / MiB,
      report.staging_peak / MiB, static_cast<unsigned long long>(report.stream_waits));
}

INSTANTIATE_TEST_SUITE_P(seeds, pool_stress_seeds,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 42u, 100u, 105u, 117u),
                                            ::testing::Bool()));

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
