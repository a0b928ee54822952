// bench_alloc: host time per allocate+free pair of gpumem's pool_resource against cudaMalloc,
// cudaMallocAsync (release threshold high, and 0), PyTorch's caching allocator and RMM's pool and
// arena resources (each where its library was found), all measured in the same run on the same
// device, with ratios competitor/gpumem, and the memory each holds against the bytes live.
//
// Traces (bench/support/traces.hpp), one per thread, each thread on its own stream, on 1, 4 and 16
// threads: small (256 B-4 KiB), mixed (1 KiB-4 MiB) and large (1-64 MiB) random traces; a
// training loop and an inference loop whose shapes change every step; then the replays of two
// recorded logs with fragmentation = peak bytes held / peak bytes live, each logged thread on a
// thread of its own (replay_options::honour_threads): bench/data/training_loop.csv (a simulated
// training loop, bench/data/make_training_trace.py) and bench/data/pytorch_training_loop.csv (the
// first 13,000 events of gpumem's log of a real PyTorch training loop on a GPU: the `train` case
// of bench/python_alloc.py, a 4-layer Transformer encoder whose batch, 8-64, and sequence length,
// 32-512, change every step; PyTorch's main thread allocates, its autograd thread frees most of
// the activations). Every allocator is warmed up by one untimed pass of the same trace (cudaMalloc
// has no cache), then timed over --reps passes (default 5), and more (up to 101) while they add
// up to less than --min-time seconds (default 0.1); the median pass is reported, so that passes
// slowed by the machine (a descheduled thread, a burst of the host's other work) move no figure.
// cudaMalloc and the other slow ones run shortened traces; the time is per pair either way.
//
// Memory held: gpumem's pools report their peak (marked + when the pool still grew in its last
// timed pass: it had not settled); for the others, the device memory in use after the timed
// passes (caching allocators keep what they took) less what was in use before.
//
//   bench_alloc [--quick | --full] [--pool-only] [--only TRACE] [--log PATH] [--reps N]
//               [--min-time S] [--wait-across-streams] [--query-other-streams] [--held-target X]
//               [--max-cached-size BYTES]
//     GPUMEM_DEVICE=cuda|host (host: a scaled-down smoke run unless --full); --pool-only skips the
//     competitors and --only runs one trace (replay: both replays), for quick experiments; --log
//     replays that log instead of the two; --wait-across-streams turns that option on for the
//     chunked pool, --query-other-streams that option for both pools; --held-target sets the
//     expandable pool's held_target, --max-cached-size both pools' max_cached_size (e.g. 256KiB).
#include "support/alloc_args.hpp"
#include "support/alloc_cases.hpp"
#include "support/alloc_diagnostics.hpp"
#include "support/bench_support.hpp"
#include "support/competitors.hpp"
#include "support/traces.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/detail/pool_size_classes.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#ifndef GPUMEM_BENCH_DATA_DIR
#define GPUMEM_BENCH_DATA_DIR "bench/data"
#endif

namespace gpumem::bench {
namespace {

timed_upstream* pools_upstream = nullptr;
// The command line (support/alloc_args.hpp), set once by run().
alloc_args args;

void run_trace(memory_resource& mr, trace const& t, stream_handle stream) {
  std::vector<std::pair<void*, std::size_t>> live;
  live.reserve(1024);
  try {
    for (trace_op const& op : t.ops) {
      if (op.size != 0) {
        live.emplace_back(mr.allocate(op.size, stream), op.size);
      } else {
        auto const [p, bytes] = live[op.index];
        live[op.index] = live.back();
        live.pop_back();
        mr.deallocate(p, bytes, stream);
      }
    }
  } catch (...) {
    for (auto const& [p, bytes] : live)  // out of memory: give back what this thread holds
      mr.deallocate(p, bytes, stream);
    throw;
  }
}

struct result {
  double ns = -1;                // per pair (wall time / all threads' pairs); -1: out of memory
  double held = 0;               // peak bytes held / the sum of the traces' peak bytes live
  double events_per_large = -1;  // gpumem: events recorded per free above max_cached_size
  // gpumem: upstream allocations + deallocations per timed run (a warm pool that still grows or
  // trims makes a cudaMalloc or cudaFree for each).
  double upstream_calls = -1;
  // gpumem: no growth in the last timed run (for an expandable pool, also none that moved
  // memory: each counts as an upstream allocation). Else what the pool holds had not settled (a
  // pool whose streams take memory from each other may grow for hundreds of passes).
  bool settled = true;
};

std::size_t device_bytes_in_use() {
  memory_info const m = backend().get_memory_info();
  return m.total - m.free;
}

// The largest size the pools cache: max_cached_size rounded up to the size class that holds it, as
// the pool does (nothing below the smallest class).
std::size_t pools_cached_limit() {
  return args.max_cached_size >= detail::pool_granularity
             ? detail::pool_class_size(detail::pool_size_class(args.max_cached_size))
             : 0;
}

result measure(competitor const& c, case_spec const& spec, int threads) {
  std::vector<trace> traces;
  std::vector<stream_handle> streams;
  std::size_t pairs = 0, peaks = 0, large_frees = 0;
  std::size_t const cached_limit = pools_cached_limit();
  for (int t = 0; t < threads; ++t) {
    traces.push_back(spec.make(1000 + static_cast<std::uint64_t>(t), c.pair_scale));
    streams.push_back(backend().create_stream(true));
    pairs += traces.back().pairs;
    peaks += traces.back().peak_live_bytes;
    for (trace_op const& op : traces.back().ops)
      large_frees += op.size > cached_limit ? 1 : 0;
  }
  result out;
  double seconds = -1;
  if (c.before) c.before();
  std::size_t const in_use_before = device_bytes_in_use();
  {
    auto mr = c.make();
    // With --persistent-threads one team serves every run of this measurement (and ends before
    // the resource); otherwise each run starts and ends its threads.
    std::optional<thread_team> team;
    if (args.persistent_threads) team.emplace(threads);
    auto const run_all = [&](std::vector<double>* own) {
      auto const body = [&](int t) { run_trace(*mr, traces[t], streams[t]); };
      return team ? team->run(body, own) : run_threads(threads, body, own);
    };
    try {
      if (c.warm_up) run_all(nullptr);
      auto* pool = dynamic_cast<pool_resource*>(mr.get());
      std::vector<double> runs;
      std::uint64_t events = 0;
      std::uint64_t upstream_calls = 0;
      for (int rep = 0; another_timed_run(args, runs); ++rep) {
        pool_statistics const before = pool ? pool->statistics() : pool_statistics{};
        double const upstream_before = pools_upstream->seconds();
        std::vector<double> own;
        runs.push_back(run_all(&own));
        if (pool == nullptr) continue;
        // Diagnostic (stderr): growth inside a timed run is what makes a warm pool slow, and the
        // spread of the threads' own times shows a straggler.
        pool_statistics const s = pool->statistics();
        events += s.events_recorded - before.events_recorded;
        upstream_calls += s.upstream_allocations - before.upstream_allocations +
                          s.upstream_deallocations - before.upstream_deallocations;
        out.settled = s.upstream_allocations == before.upstream_allocations;
        if (rep < args.repetitions)  // the first runs' lines; the rest are alike
          report_pool_run(pool_run{c.name + " " + spec.name + "/" + std::to_string(threads) +
                                       " threads, run " + std::to_string(rep + 1),
                                   before, s, (pools_upstream->seconds() - upstream_before) * 1e3,
                                   pairs, peaks, std::move(own), runs.back()});
      }
      if (pool != nullptr && runs.size() > static_cast<std::size_t>(args.repetitions))
        std::fprintf(stderr, "%s %s/%d threads: %zu timed runs in all\n", c.name.c_str(),
                     spec.name.c_str(), threads, runs.size());
      auto const timed_runs = static_cast<double>(runs.size());
      std::sort(runs.begin(), runs.end());
      seconds = runs[runs.size() / 2];
      std::size_t const held =
          pool != nullptr ? pool->statistics().peak_held_bytes
                          : device_bytes_in_use() - std::min(device_bytes_in_use(), in_use_before);
      out.held = static_cast<double>(held) / static_cast<double>(peaks);
      if (pool != nullptr) out.upstream_calls = static_cast<double>(upstream_calls) / timed_runs;
      if (pool != nullptr && large_frees > 0)
        out.events_per_large =
            static_cast<double>(events) / (static_cast<double>(large_frees) * timed_runs);
    } catch (out_of_memory const& e) {
      std::fprintf(stderr, "%s, %s, %d threads: %s\n", c.name.c_str(), spec.name.c_str(), threads,
                   e.what());
    }
    backend().synchronize();
  }
  if (c.after) c.after();
  for (stream_handle s : streams)
    backend().destroy_stream(s);
  if (seconds >= 0) out.ns = seconds * 1e9 / static_cast<double>(pairs);
  return out;
}

// Held / live, marked "+" when the pool still grew in its last timed run.
std::string held_figure(result const& r) {
  return fixed(r.held, 2) + (r.settled ? "" : "+");
}

struct replay_numbers {
  double ns_per_pair = -1;
  double fragmentation = 0;       // gpumem: peak held / peak live after the cold replay
  double warm_fragmentation = 0;  // the same after the warm replays too
  double upstream_calls = -1;     // gpumem: upstream allocations + frees per warm replay
};

replay_numbers measure_replay(competitor const& c, std::vector<log_event> const& events) {
  replay_numbers out;
  std::vector<stream_handle> streams{backend().create_stream(true), backend().create_stream(true)};
  if (c.before) c.before();
  {
    auto mr = c.make();
    replay_options options;
    options.streams = streams;
    options.honour_threads = true;
    try {
      replay_result const cold = replay(events, *mr, options);
      auto* pool = dynamic_cast<pool_resource*>(mr.get());
      if (pool != nullptr)
        out.fragmentation = static_cast<double>(pool->statistics().peak_held_bytes) /
                            static_cast<double>(cold.peak_live_bytes);
      std::vector<double> runs;  // ns per pair of each warm replay
      pool_statistics const before = pool != nullptr ? pool->statistics() : pool_statistics{};
      std::vector<double>
          seconds;  // of each warm replay (its allocations may differ: one can fail)
      do {
        replay_result const warm = c.warm_up ? replay(events, *mr, options) : cold;
        runs.push_back(warm.seconds * 1e9 / static_cast<double>(warm.allocations));
        seconds.push_back(warm.seconds);
      } while (c.warm_up && another_timed_run(args, seconds));
      auto const warm_runs = static_cast<double>(runs.size());
      if (pool != nullptr) {
        pool_statistics const after = pool->statistics();
        out.warm_fragmentation =
            static_cast<double>(after.peak_held_bytes) / static_cast<double>(cold.peak_live_bytes);
        out.upstream_calls =
            static_cast<double>(after.upstream_allocations - before.upstream_allocations +
                                after.upstream_deallocations - before.upstream_deallocations) /
            warm_runs;
      }
      std::sort(runs.begin(), runs.end());
      out.ns_per_pair = runs[runs.size() / 2];
    } catch (std::exception const& e) {
      std::fprintf(stderr, "%s, replay: %s\n", c.name.c_str(), e.what());
    }
    backend().synchronize();
  }
  if (c.after) c.after();
  for (stream_handle s : streams)
    backend().destroy_stream(s);
  return out;
}

// The first passes of a process run slower than the rest (page faults, the host's clock rising):
// on an H100 machine the first measurement's five one-thread passes took 90, 32, 23, 15 and 14 ms.
// Half a second of a trace on a resource that is then dropped, untimed, so that whichever
// measurement comes first is not charged for it.
void warm_up_process(competitor const& c, case_spec const& spec) {
  trace const t = spec.make(999, c.pair_scale);
  stream_handle const stream = backend().create_stream(true);
  try {
    auto mr = c.make();
    stopwatch clock;
    do
      run_trace(*mr, t, stream);
    while (clock.seconds() < 0.5);
  } catch (std::exception const& e) {  // the measurements report it if it is theirs too
    std::fprintf(stderr, "warm-up: %s\n", e.what());
  }
  backend().synchronize();
  backend().destroy_stream(stream);
}

int run(int argc, char** argv) {
  alloc_args defaults;
  defaults.quick = backend().kind() != backend_kind::cuda;
  defaults.logs = {{"replay", std::string(GPUMEM_BENCH_DATA_DIR) + "/training_loop.csv"},
                   {"pytorch", std::string(GPUMEM_BENCH_DATA_DIR) + "/pytorch_training_loop.csv"}};
  std::optional<alloc_args> parsed = parse_alloc_args(argc, argv, std::move(defaults));
  if (!parsed) return 2;
  args = std::move(*parsed);
  bool const quick = args.quick;
  bool const pool_only = args.pool_only;
  std::string const& only = args.only;
  auto const& logs = args.logs;
  int const repetitions = args.repetitions;
  bool const cuda = backend().kind() == backend_kind::cuda;
  std::printf(
      "bench_alloc: ns per allocate+free pair (host time, median of %d runs or more, until they "
      "add up to %.2f s), ratio = competitor / gpumem\n",
      repetitions, args.min_time);
  std::printf("device: %s%s\n", device_line().c_str(),
              quick ? "  [quick: scaled-down smoke run]" : "");
  std::printf("PyTorch: %s\nRMM: %s\n", torch_status().c_str(), rmm_status().c_str());
  if (args.wait_across_streams) std::printf("gpumem pool: pool_options::wait_across_streams on\n");
  if (args.query_other_streams) std::printf("gpumem pools: pool_options::query_other_streams on\n");
  if (args.persistent_threads)
    std::printf("threads: one team per measurement, kept across its runs\n");
  std::printf("gpumem expandable: pool_options::held_target %.3g\n", args.held_target);
  if (args.max_cached_size != pool_options{}.max_cached_size)
    std::printf("gpumem pools: pool_options::max_cached_size %s\n",
                format_bytes(args.max_cached_size).c_str());

  timed_upstream upstream;
  pools_upstream = &upstream;
  std::size_t const previous_threshold = backend().set_async_release_threshold(0);
  backend().set_async_release_threshold(previous_threshold);
  std::vector<competitor> const competitors = make_competitors(args, upstream, cuda, pool_only);
  std::vector<int> const thread_counts =
      !args.threads.empty() ? args.threads
                            : (quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 16});
  int const most = *std::max_element(thread_counts.begin(), thread_counts.end());

  std::vector<std::string> header{"trace", "threads"};
  for (auto const& c : competitors)
    header.push_back(c.name);
  header.push_back("gpumem scaling");
  table speed(header);
  header.pop_back();
  table memory(header);
  std::vector<std::string> goals;
  auto goal = [&](std::string const& text, double value, bool met) {
    goals.push_back(text + ": " + fixed(value, value < 10 ? 2 : 1) + " -> " +
                    (met ? "met" : "MISSED"));
  };
  warm_up_process(competitors.front(), make_cases(quick).front());
  for (auto const& spec : make_cases(quick)) {
    if (!only.empty() && only != spec.name) continue;
    double single = 0;
    double worst_held = 0;
    bool settled = true;  // gpumem's pool grew in no last timed run
    double events = -1;
    std::string upstream_calls;  // per thread count
    for (int threads : thread_counts) {
      std::vector<std::string> row{spec.name, std::to_string(threads)};
      std::vector<std::string> held_row = row;
      result const mine = measure(competitors[0], spec, threads);
      row.push_back(mine.ns < 0 ? "OOM" : fixed(mine.ns, mine.ns < 100 ? 1 : 0));
      held_row.push_back(held_figure(mine));
      worst_held = std::max(worst_held, mine.held);
      settled = settled && mine.settled;
      events = std::max(events, mine.events_per_large);
      upstream_calls += (upstream_calls.empty() ? "" : ", ") + std::to_string(threads) + "t " +
                        (mine.upstream_calls < 0 ? "-" : fixed(mine.upstream_calls, 1));
      double best = std::numeric_limits<double>::max();  // the fastest competitor
      for (std::size_t i = 1; i < competitors.size(); ++i) {
        result const other = measure(competitors[i], spec, threads);
        row.push_back(other.ns < 0 ? "OOM" : with_ratio(other.ns, mine.ns));
        held_row.push_back(other.ns < 0 || other.held <= 0 ? "-" : held_figure(other));
        if (other.ns > 0 && competitors[i].name.rfind("gpumem", 0) != 0)
          best = std::min(best, other.ns);
      }
      if (threads == 1) single = mine.ns;
      double const scaling = mine.ns > 0 ? single / mine.ns : 0;  // throughput ratio
      row.push_back(single > 0 ? fixed(scaling, 1) + "x" : "-");
      speed.add(row);
      memory.add(held_row);
      std::fflush(stdout);
      bool const competed = best < std::numeric_limits<double>::max() && mine.ns > 0;
      if (threads == 1 && (spec.name == "small" || spec.name == "mixed"))
        goal(spec.name + ", 1 thread <= 100 ns/pair", mine.ns, mine.ns > 0 && mine.ns <= 100);
      if (threads == 1 && competed)
        goal(spec.name + ", 1 thread >= 3x the best competitor", best / mine.ns,
             best / mine.ns >= 3);
      if (threads == most && threads > 1 && spec.name != "small") {
        if (single > 0)
          goal(spec.name + ", " + std::to_string(most) + " threads >= 8x 1-thread throughput",
               scaling, scaling >= 8);
        if (competed && spec.name != "mixed")
          goal(spec.name + ", " + std::to_string(most) + " threads >= 3x the best competitor",
               best / mine.ns, best / mine.ns >= 3);
      }
    }
    if (spec.shaped)
      goal(spec.name + ", gpumem peak held <= 1.25x peak live (worst thread count" +
               (settled ? ")" : "; still growing)"),
           worst_held, worst_held > 0 && worst_held <= 1.25);
    if (events >= 0)
      goals.push_back(spec.name + ": gpumem events recorded per free above " +
                      format_bytes(pools_cached_limit()) + ": " + fixed(events, 3));
    goals.push_back(spec.name +
                    ": gpumem upstream allocations + frees per timed run: " + upstream_calls);
  }

  // Replays of the recorded logs.
  std::string replayed;  // "path (n events), ..."
  for (auto const& [row_name, log_path] : logs) {
    if (!only.empty() && only != "replay") break;
    std::vector<log_event> events;
    try {
      events = parse_log_file(log_path);
    } catch (std::exception const& e) {
      std::fprintf(stderr, "replay skipped: %s\n", e.what());
    }
    if (events.empty()) continue;
    replayed += (replayed.empty() ? "" : ", ") + log_path + " (" + std::to_string(events.size()) +
                " events)";
    std::vector<std::string> row{row_name, "1"};
    std::vector<std::string> held_row = row;
    replay_numbers const mine = measure_replay(competitors[0], events);
    row.push_back(mine.ns_per_pair < 0 ? "failed"
                                       : fixed(mine.ns_per_pair, mine.ns_per_pair < 100 ? 1 : 0));
    held_row.push_back(fixed(mine.fragmentation, 3));
    double expandable = 0;
    for (std::size_t i = 1; i < competitors.size(); ++i) {
      replay_numbers const other = measure_replay(competitors[i], events);
      row.push_back(other.ns_per_pair < 0 ? "failed"
                                          : with_ratio(other.ns_per_pair, mine.ns_per_pair));
      held_row.push_back(other.fragmentation > 0 ? fixed(other.fragmentation, 3) : "-");
      if (competitors[i].name == "gpumem expandable") expandable = other.fragmentation;
    }
    row.push_back("-");
    speed.add(row);
    memory.add(held_row);
    if (row_name == "pytorch") {
      // The Python goal: 0.6x PyTorch's default allocator, which held 1.93x the live peak there.
      goal("pytorch replay, gpumem pool held <= 1.16x live", mine.fragmentation,
           mine.fragmentation > 0 && mine.fragmentation <= 1.16);
      if (expandable > 0)
        goal("pytorch replay, gpumem expandable held <= 1.16x live", expandable,
             expandable <= 1.16);
    } else {
      goal(row_name + " fragmentation <= 1.15", mine.fragmentation,
           mine.fragmentation > 0 && mine.fragmentation <= 1.15);
    }
    goals.push_back(row_name + ": gpumem peak held / peak live after the warm replays too: " +
                    fixed(mine.warm_fragmentation, 3) +
                    "; upstream allocations + frees per warm replay: " +
                    (mine.upstream_calls < 0 ? "-" : fixed(mine.upstream_calls, 1)));
  }
  std::printf("\n");
  speed.print();
  std::printf(
      "\ngpumem scaling: throughput at n threads / at 1 thread (each thread its own trace and "
      "stream).\n\nmemory: peak bytes held / the sum of the threads' peak bytes live (gpumem: the "
      "pool's peak;\nothers: device memory in use after the timed runs; +: the pool still grew "
      "(or moved memory)\nin its last timed run, so that it may hold more in a longer one); "
      "replays: gpumem's "
      "fragmentation over\n%s.\n\n",
      replayed.empty() ? "no log" : replayed.c_str());
  memory.print();
  std::printf("\ngoals (GPU):\n");
  for (auto const& line : goals)
    std::printf("  %s\n", line.c_str());
  backend().set_async_release_threshold(previous_threshold);
  return 0;
}

}  // namespace
}  // namespace gpumem::bench

int main(int argc, char** argv) {
  try {
    return gpumem::bench::run(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_alloc: %s\n", e.what());
    return 1;
  }
}
