// bench_alloc's diagnostic line for one timed run of a gpumem pool (stderr): growth inside a timed
// run is what makes a warm pool slow, and the spread of the threads' own times shows a straggler.
#pragma once

#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::bench {

struct pool_run {
  std::string what;  // "gpumem pool large/16 threads, run 3"
  pool_statistics before, after;
  double upstream_ms;       // in the upstream during the run, all threads
  std::size_t pairs;        // allocate+free pairs of the run, all threads
  std::size_t peaks;        // the sum of the traces' peak live bytes
  std::vector<double> own;  // each thread's seconds
  double wall;              // the run's seconds
};

inline void report_pool_run(pool_run r) {
  pool_statistics const& b = r.before;
  pool_statistics const& s = r.after;
  auto const delta = [](std::uint64_t now, std::uint64_t then) {
    return static_cast<unsigned long long>(now - then);
  };
  std::sort(r.own.begin(), r.own.end());
  double const least = r.own.empty() ? 0 : r.own.front();
  double const middle = r.own.empty() ? 0 : r.own[r.own.size() / 2];
  double const most = r.own.empty() ? 0 : r.own.back();
  std::fprintf(
      stderr,
      "%s: %llu upstream allocations, %llu upstream frees (%.2f ms in the upstream, all "
      "threads), %llu reclaims, %llu stream waits, %llu idle takes, %llu "
      "synchronizations, %llu events, %llu device queries, %llu pages mapped, %.4f lock "
      "acquisitions per pair (large path: %.2f ms waiting, %.2f ms holding), held %zu B "
      "(%.2fx the sum of the traces' peaks); ms per thread min %.2f median %.2f max "
      "%.2f, wall %.2f\n",
      r.what.c_str(), delta(s.upstream_allocations, b.upstream_allocations),
      delta(s.upstream_deallocations, b.upstream_deallocations), r.upstream_ms,
      delta(s.reclaims, b.reclaims), delta(s.stream_waits, b.stream_waits),
      delta(s.idle_takes, b.idle_takes), delta(s.synchronizations, b.synchronizations),
      delta(s.events_recorded, b.events_recorded), delta(s.device_queries, b.device_queries),
      delta(s.pages_mapped, b.pages_mapped),
      static_cast<double>(s.lock_acquisitions - b.lock_acquisitions) / static_cast<double>(r.pairs),
      static_cast<double>(s.large_lock_wait_ns - b.large_lock_wait_ns) * 1e-6,
      static_cast<double>(s.large_lock_hold_ns - b.large_lock_hold_ns) * 1e-6, s.held_bytes,
      static_cast<double>(s.held_bytes) / static_cast<double>(r.peaks), least * 1e3, middle * 1e3,
      most * 1e3, r.wall * 1e3);
}

}  // namespace gpumem::bench
