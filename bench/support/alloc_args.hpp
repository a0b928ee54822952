// bench_alloc's command line: what to run and how the pools are configured (bench/alloc.cpp).
#pragma once

#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::bench {

struct alloc_args {
  bool quick = false;      // --quick / --full (default: quick without a GPU)
  bool pool_only = false;  // --pool-only: gpumem's pools alone
  std::string only;        // --only TRACE: one trace; empty: all
  // The logs replayed: (row name, path); --log PATH replays that one instead.
  std::vector<std::pair<std::string, std::string>> logs;
  int repetitions = 5;  // --reps N: timed runs per measurement (after the warm-up), median reported
  // --min-time S: more timed runs (up to max_timed_runs) while those of a measurement add up to
  // less than S seconds, so that a short run's median is not one burst of the host's other work.
  double min_time = 0.1;
  bool wait_across_streams = false;  // the chunked pool's pool_options::wait_across_streams
  bool query_other_streams = false;  // both pools' pool_options::query_other_streams
  double held_target = pool_options{}.held_target;               // the expandable pool's
  std::size_t max_cached_size = pool_options{}.max_cached_size;  // both pools'
  std::vector<int> threads;  // --threads 1,4: the thread counts; empty: 1,4 (quick) or 1,4,16
  bool persistent_threads = false;  // --persistent-threads: one team of threads for all runs
};

// "1,4,16" -> {1, 4, 16}; nothing when an entry is not a whole number from 1 to 1024.
inline std::optional<std::vector<int>> parse_thread_counts(char const* text) {
  std::vector<int> counts;
  while (*text != '\0') {
    if (*text < '0' || *text > '9') return std::nullopt;  // no sign or space, which strtol takes
    char* end = nullptr;
    long const n = std::strtol(text, &end, 10);
    bool const more = *end == ',';
    if (end == text || n < 1 || n > 1024 || (!more && *end != '\0') || (more && end[1] == '\0'))
      return std::nullopt;
    counts.push_back(static_cast<int>(n));
    text = more ? end + 1 : end;
  }
  if (counts.empty()) return std::nullopt;
  return counts;
}

// Whether a measurement whose timed runs took `runs` seconds so far takes another: at least
// --reps runs, then more while they add up to less than --min-time seconds, up to max_timed_runs.
inline constexpr std::size_t max_timed_runs = 101;
inline bool another_timed_run(alloc_args const& a, std::vector<double> const& runs) {
  if (runs.size() < static_cast<std::size_t>(a.repetitions)) return true;
  double total = 0;
  for (double r : runs)
    total += r;
  return total < a.min_time && runs.size() < max_timed_runs;
}

// Parses argv over `defaults`; prints the usage to stderr and returns nothing on an unknown or
// malformed argument.
inline std::optional<alloc_args> parse_alloc_args(int argc, char** argv, alloc_args defaults) {
  alloc_args a = std::move(defaults);
  for (int i = 1; i < argc; ++i) {
    bool const has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--quick") == 0)
      a.quick = true;
    else if (std::strcmp(argv[i], "--full") == 0)
      a.quick = false;
    else if (std::strcmp(argv[i], "--pool-only") == 0)
      a.pool_only = true;
    else if (std::strcmp(argv[i], "--only") == 0 && has_value)
      a.only = argv[++i];
    else if (std::strcmp(argv[i], "--log") == 0 && has_value)
      a.logs = {{"replay", argv[++i]}};
    else if (std::strcmp(argv[i], "--reps") == 0 && has_value && std::atoi(argv[i + 1]) > 0)
      a.repetitions = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--min-time") == 0 && has_value &&
             std::atof(argv[i + 1]) >= 0.0 && std::atof(argv[i + 1]) <= 60.0)
      a.min_time = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--wait-across-streams") == 0)
      a.wait_across_streams = true;
    else if (std::strcmp(argv[i], "--query-other-streams") == 0)
      a.query_other_streams = true;
    else if (std::strcmp(argv[i], "--held-target") == 0 && has_value &&
             std::atof(argv[i + 1]) >= 1.0)
      a.held_target = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--max-cached-size") == 0 && has_value &&
             try_parse_bytes(argv[i + 1]).has_value())
      a.max_cached_size = *try_parse_bytes(argv[++i]);
    else if (std::strcmp(argv[i], "--persistent-threads") == 0)
      a.persistent_threads = true;
    else if (std::strcmp(argv[i], "--threads") == 0 && has_value &&
             parse_thread_counts(argv[i + 1]).has_value())
      a.threads = *parse_thread_counts(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_alloc [--quick | --full] [--pool-only] [--only small|mixed|large|"
                   "training|inference|replay] [--log PATH] [--reps N] [--min-time S] "
                   "[--wait-across-streams] "
                   "[--query-other-streams] [--held-target X] [--max-cached-size BYTES] "
                   "[--threads N,...] [--persistent-threads]\n"
                   "  --quick: scaled-down smoke run (the default without a GPU); --full: the "
                   "full run anywhere\n"
                   "  --pool-only: gpumem's pools alone, no competitors\n"
                   "  --reps N: timed runs per measurement, median reported (default 5)\n"
                   "  --min-time S: more runs, up to 101, while a measurement's timed runs add up "
                   "to less than S seconds (default 0.1; 0 to 60)\n"
                   "  --wait-across-streams: the chunked pool with "
                   "pool_options::wait_across_streams\n"
                   "  --query-other-streams: both pools with pool_options::query_other_streams\n"
                   "  --held-target X: the expandable pool's pool_options::held_target (at "
                   "least 1)\n"
                   "  --max-cached-size BYTES: both pools' pool_options::max_cached_size (e.g. "
                   "256KiB)\n"
                   "  --threads N,...: the thread counts measured (default 1,4,16; 1,4 with "
                   "--quick); scaling and the goals need 1 first\n"
                   "  --persistent-threads: the threads of a measurement live across its runs "
                   "(default: each run starts and ends its own)\n");
      return std::nullopt;
    }
  }
  return a;
}

}  // namespace gpumem::bench
