// bench_alloc: host time per allocate+free pair of gpumem's pool_resource against cudaMalloc,
// cudaMallocAsync (release threshold high, and 0) and PyTorch's caching allocator (when CMake found
// libtorch), all measured in the same run on the same device, with ratios competitor/gpumem.
//
// Cases: random traces with sizes log-uniform in small (256 B-4 KiB), mixed (1 KiB-4 MiB) and
// large (1-64 MiB), up to 1000 live blocks per thread (100 for large), on 1, 4 and 16 threads
// (each thread its own trace and stream); then the replay of a recorded training-loop log
// (bench/data/training_loop.csv), with fragmentation = peak bytes held / peak bytes live.
// Every allocator is warmed up by one untimed pass of the same trace (cudaMalloc has no cache),
// then timed over --reps passes (default 3); the median pass is reported, so that one pass slowed
// by the machine (a descheduled thread, a clock change) moves no figure. cudaMalloc and the other
// slow ones run fewer pairs; the time is per pair either way.
//
//   bench_alloc [--quick | --full] [--pool-only] [--only TRACE] [--log PATH] [--reps N]
//     GPUMEM_DEVICE=cuda|host (host: a scaled-down smoke run unless --full); --pool-only skips the
//     competitors and --only runs one trace (small, mixed, large or replay), for quick experiments.
#include "support/bench_support.hpp"
#include "support/torch_allocator.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifndef GPUMEM_BENCH_DATA_DIR
#define GPUMEM_BENCH_DATA_DIR "bench/data"
#endif

namespace gpumem::bench {
namespace {

// --- competitors: each a memory_resource, so every one pays the same virtual call --------------

class malloc_resource final : public memory_resource {  // cudaMalloc / cudaFree
 public:
  std::string name() const override { return "cudaMalloc"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override { return backend().allocate(bytes); }
  void do_deallocate(void* p, std::size_t, stream_handle) noexcept override {
    backend().deallocate(p);
  }
};

class malloc_async_resource final : public memory_resource {  // cudaMallocAsync / cudaFreeAsync
 public:
  std::string name() const override { return "cudaMallocAsync"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    return backend().allocate_async(bytes, s);
  }
  void do_deallocate(void* p, std::size_t, stream_handle s) noexcept override {
    backend().deallocate_async(p, s);
  }
};

class torch_resource final : public memory_resource {
 public:
  std::string name() const override { return "PyTorch"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    return torch_allocate(bytes, static_cast<void*>(s));
  }
  void do_deallocate(void* p, std::size_t, stream_handle) noexcept override { torch_deallocate(p); }
};

// The pools' upstream: cuda_resource, with the time its allocations take (growth inside a timed run
// shows up here; cudaMalloc calls made by many threads at once wait for each other in the driver).
class timed_upstream final : public memory_resource {
 public:
  std::string name() const override { return inner_.name(); }
  double seconds() const { return static_cast<double>(ns_.load()) * 1e-9; }
  memory_info get_memory_info() const override { return inner_.get_memory_info(); }
  resource_properties properties() const noexcept override { return inner_.properties(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    stopwatch clock;
    void* p = inner_.allocate(bytes, s);
    ns_.fetch_add(static_cast<std::uint64_t>(clock.seconds() * 1e9));
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle s) noexcept override {
    inner_.deallocate(p, bytes, s);
  }

  cuda_resource inner_;
  std::atomic<std::uint64_t> ns_{0};
};

timed_upstream* pools_upstream = nullptr;
// Timed runs per measurement (after the warm-up); the median is reported.
int repetitions = 3;

struct competitor {
  std::string name;
  double pair_scale;  // fraction of the pool's pair count this one runs
  bool warm_up;
  std::function<std::unique_ptr<memory_resource>()> make;
  std::function<void()> before;  // set up (e.g. the async release threshold)
  std::function<void()> after;   // give memory back between cases
};

// --- traces --------------------------------------------------------------------------------------

struct trace_op {
  std::uint32_t size;   // allocate `size` bytes (free: 0)
  std::uint32_t index;  // free: the live block at this index (swapped with the last)
};

struct trace {
  std::vector<trace_op> ops;
  std::size_t pairs = 0;
  std::size_t peak_live_bytes = 0;  // as requested
};

trace make_trace(std::uint64_t seed, std::size_t min_bytes, std::size_t max_bytes,
                 std::size_t pairs, std::size_t max_live) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double const lo = std::log(static_cast<double>(min_bytes));
  double const hi = std::log(static_cast<double>(max_bytes));
  trace t;
  t.pairs = pairs;
  std::size_t live = 0;
  std::size_t allocated = 0;
  std::vector<std::uint32_t> sizes;  // of the live blocks, in the trace's order
  std::size_t live_bytes = 0;
  while (allocated < pairs || live > 0) {
    bool alloc = allocated < pairs &&
                 (live == 0 || (live < max_live && (allocated < max_live / 2 || rng() % 2 == 0)));
    if (alloc) {
      t.ops.push_back({static_cast<std::uint32_t>(std::exp(lo + unit(rng) * (hi - lo))), 0});
      sizes.push_back(t.ops.back().size);
      live_bytes += sizes.back();
      t.peak_live_bytes = std::max(t.peak_live_bytes, live_bytes);
      ++live;
      ++allocated;
    } else {
      t.ops.push_back({0, static_cast<std::uint32_t>(rng() % live)});
      live_bytes -= sizes[t.ops.back().index];
      sizes[t.ops.back().index] = sizes.back();
      sizes.pop_back();
      --live;
    }
  }
  return t;
}

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

struct case_spec {
  char const* name;
  std::size_t min_bytes, max_bytes, pairs, max_live;
};

// ns per pair (wall time / all threads' pairs); negative when the allocator ran out of memory.
double measure(competitor const& c, case_spec const& spec, int threads) {
  std::size_t const pairs = std::max<std::size_t>(
      50, static_cast<std::size_t>(static_cast<double>(spec.pairs) * c.pair_scale));
  std::vector<trace> traces;
  std::vector<stream_handle> streams;
  for (int t = 0; t < threads; ++t) {
    traces.push_back(make_trace(1000 + static_cast<std::uint64_t>(t), spec.min_bytes,
                                spec.max_bytes, pairs, spec.max_live));
    streams.push_back(backend().create_stream(true));
  }
  double seconds = -1;
  if (c.before) c.before();
  {
    auto mr = c.make();
    try {
      if (c.warm_up) run_threads(threads, [&](int t) { run_trace(*mr, traces[t], streams[t]); });
      auto* pool = dynamic_cast<pool_resource*>(mr.get());
      std::size_t peaks = 0;
      for (trace const& t : traces)
        peaks += t.peak_live_bytes;
      std::vector<double> runs;
      for (int rep = 0; rep < repetitions; ++rep) {
        pool_statistics const before = pool ? pool->statistics() : pool_statistics{};
        double const upstream_before = pools_upstream->seconds();
        std::vector<double> own;
        runs.push_back(run_threads(
            threads, [&](int t) { run_trace(*mr, traces[t], streams[t]); }, &own));
        if (pool == nullptr) continue;
        // Diagnostic (stderr): growth inside a timed run is what makes a warm pool slow, and the
        // spread of the threads' own times shows a straggler.
        pool_statistics const s = pool->statistics();
        std::sort(own.begin(), own.end());
        std::fprintf(
            stderr,
            "%s %s/%d threads, run %d: %llu upstream allocations (%.2f ms in the "
            "upstream, all threads), %llu reclaims, %.4f lock acquisitions per pair, "
            "held %zu B (%.2fx the sum of the traces' peaks); ms per thread min %.2f median %.2f "
            "max %.2f, wall %.2f\n",
            c.name.c_str(), spec.name, threads, rep + 1,
            static_cast<unsigned long long>(s.upstream_allocations - before.upstream_allocations),
            (pools_upstream->seconds() - upstream_before) * 1e3,
            static_cast<unsigned long long>(s.reclaims - before.reclaims),
            static_cast<double>(s.lock_acquisitions - before.lock_acquisitions) /
                static_cast<double>(pairs * static_cast<std::size_t>(threads)),
            s.held_bytes, static_cast<double>(s.held_bytes) / static_cast<double>(peaks),
            own.front() * 1e3, own[own.size() / 2] * 1e3, own.back() * 1e3, runs.back() * 1e3);
      }
      std::sort(runs.begin(), runs.end());
      seconds = runs[runs.size() / 2];
    } catch (out_of_memory const& e) {
      std::fprintf(stderr, "%s, %s, %d threads: %s\n", c.name.c_str(), spec.name, threads,
                   e.what());
    }
    backend().synchronize();
  }
  if (c.after) c.after();
  for (stream_handle s : streams)
    backend().destroy_stream(s);
  return seconds < 0
             ? -1
             : seconds * 1e9 / static_cast<double>(pairs * static_cast<std::size_t>(threads));
}

struct replay_numbers {
  double ns_per_pair = -1;
  double fragmentation = 0;
};

replay_numbers measure_replay(competitor const& c, std::vector<log_event> const& events) {
  replay_numbers out;
  std::vector<stream_handle> streams{backend().create_stream(true), backend().create_stream(true)};
  if (c.before) c.before();
  {
    auto mr = c.make();
    replay_options options;
    options.streams = streams;
    try {
      replay_result const cold = replay(events, *mr, options);
      if (auto* pool = dynamic_cast<pool_resource*>(mr.get()); pool != nullptr)
        out.fragmentation = static_cast<double>(pool->statistics().peak_held_bytes) /
                            static_cast<double>(cold.peak_live_bytes);
      auto* pool = dynamic_cast<pool_resource*>(mr.get());
      std::vector<double> runs;  // ns per pair of each warm replay
      for (int rep = 0; rep < (c.warm_up ? repetitions : 1); ++rep) {
        pool_statistics const before = pool ? pool->statistics() : pool_statistics{};
        double const upstream_before = pools_upstream->seconds();
        replay_result const warm = c.warm_up ? replay(events, *mr, options) : cold;
        runs.push_back(warm.seconds * 1e9 / static_cast<double>(warm.allocations));
        if (pool == nullptr) continue;
        pool_statistics const s = pool->statistics();
        std::fprintf(
            stderr,
            "%s replay, run %d: %llu upstream allocations and %llu deallocations (%.2f "
            "ms allocating, of %.2f ms), %.4f lock acquisitions per pair\n",
            c.name.c_str(), rep + 1,
            static_cast<unsigned long long>(s.upstream_allocations - before.upstream_allocations),
            static_cast<unsigned long long>(s.upstream_deallocations -
                                            before.upstream_deallocations),
            (pools_upstream->seconds() - upstream_before) * 1e3, warm.seconds * 1e3,
            static_cast<double>(s.lock_acquisitions - before.lock_acquisitions) /
                static_cast<double>(warm.allocations));
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

int run(int argc, char** argv) {
  bool quick = backend().kind() != backend_kind::cuda;
  bool pool_only = false;
  std::string only;  // one trace (small, mixed, large or replay); empty: all
  std::string log_path = std::string(GPUMEM_BENCH_DATA_DIR) + "/training_loop.csv";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--full") == 0)
      quick = false;
    else if (std::strcmp(argv[i], "--pool-only") == 0)
      pool_only = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (std::strcmp(argv[i], "--log") == 0 && i + 1 < argc)
      log_path = argv[++i];
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) > 0)
      repetitions = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_alloc [--quick | --full] [--pool-only] [--only small|mixed|large|"
                   "replay] [--log PATH] [--reps N]\n"
                   "  --quick: scaled-down smoke run (the default without a GPU); --full: the "
                   "full run anywhere\n"
                   "  --pool-only: gpumem's pools alone, no competitors\n"
                   "  --reps N: timed runs per measurement, median reported (default 3)\n");
      return 2;
    }
  }
  bool const cuda = backend().kind() == backend_kind::cuda;
  std::printf(
      "bench_alloc: ns per allocate+free pair (host time, median of %d runs), ratio = competitor "
      "/ gpumem\n",
      repetitions);
  std::printf("device: %s%s\n", device_line().c_str(),
              quick ? "  [quick: scaled-down smoke run]" : "");
  std::printf("PyTorch: %s\n", torch_status().c_str());

  timed_upstream upstream;
  pools_upstream = &upstream;
  std::vector<competitor> competitors;
  competitors.push_back({"gpumem pool", 1.0, true,
                         [&] { return std::make_unique<pool_resource>(upstream, pool_options{}); },
                         nullptr, nullptr});
  // The same pool growing inside one reserved virtual range (pool_options::expandable).
  if (backend().vmm_granularity() > 0)
    competitors.push_back({"gpumem expandable", 1.0, true,
                           [&] {
                             pool_options o;
                             o.expandable = true;
                             return std::make_unique<pool_resource>(upstream, o);
                           },
                           nullptr, nullptr});
  competitors.push_back({"cudaMalloc", 0.01, false,
                         [] { return std::make_unique<malloc_resource>(); }, nullptr, nullptr});
  std::size_t const previous_threshold = backend().set_async_release_threshold(0);
  backend().set_async_release_threshold(previous_threshold);
  competitors.push_back(
      {"cudaMallocAsync", 0.1, true, [] { return std::make_unique<malloc_async_resource>(); },
       [] { backend().set_async_release_threshold(std::numeric_limits<std::size_t>::max()); },
       [] { backend().trim_async_pool(0); }});
  competitors.push_back({"cudaMallocAsync thr=0", 0.05, true,
                         [] { return std::make_unique<malloc_async_resource>(); },
                         [] { backend().set_async_release_threshold(0); },
                         [] { backend().trim_async_pool(0); }});
  if (cuda && torch_available())
    competitors.push_back({"PyTorch", 0.1, true, [] { return std::make_unique<torch_resource>(); },
                           nullptr, [] { torch_empty_cache(); }});
  if (pool_only)  // gpumem's pools only
    competitors.erase(
        std::remove_if(competitors.begin(), competitors.end(),
                       [](competitor const& c) { return c.name.rfind("gpumem", 0) != 0; }),
        competitors.end());

  std::size_t const scale = quick ? 20 : 1;
  std::vector<case_spec> cases = {
      {"small", 256, 4 * KiB, 200000 / scale, quick ? 100u : 1000u},
      {"mixed", 1 * KiB, 4 * MiB, 200000 / scale, quick ? 64u : 1000u},
      {"large", 1 * MiB, 64 * MiB, 20000 / scale, quick ? 4u : 100u},
  };
  std::vector<int> thread_counts = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 16};

  std::vector<std::string> header{"trace", "threads"};
  for (auto const& c : competitors)
    header.push_back(c.name);
  header.push_back("gpumem scaling");
  header.push_back("fragmentation");
  table results(header);
  std::map<std::string, double> single;  // gpumem ns/pair at 1 thread, per trace
  double mixed1 = 0, mixed16 = 0;
  for (auto const& spec : cases) {
    if (!only.empty() && only != spec.name) continue;
    for (int threads : thread_counts) {
      std::vector<std::string> row{spec.name, std::to_string(threads)};
      double const mine = measure(competitors[0], spec, threads);
      row.push_back(mine < 0 ? "OOM" : fixed(mine, mine < 100 ? 1 : 0));
      for (std::size_t i = 1; i < competitors.size(); ++i) {
        double const ns = measure(competitors[i], spec, threads);
        row.push_back(ns < 0 ? "OOM" : with_ratio(ns, mine));
      }
      if (threads == 1) single[spec.name] = mine;
      double const scaling = mine > 0 ? single[spec.name] / mine : 0;  // throughput ratio
      row.push_back(fixed(scaling, 1) + "x");
      row.push_back("-");
      if (std::string(spec.name) == "mixed" && threads == 1) mixed1 = mine;
      if (std::string(spec.name) == "mixed" && threads == thread_counts.back()) mixed16 = mine;
      results.add(row);
      std::fflush(stdout);
    }
  }

  // Replay of the recorded log.
  double replay_fragmentation = 0;
  std::string other_fragmentation;  // of the other pools measured
  std::vector<log_event> events;
  try {
    events = parse_log_file(log_path);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "replay skipped: %s\n", e.what());
  }
  if (!events.empty() && (only.empty() || only == "replay")) {
    std::vector<std::string> row{"replay", "1"};
    replay_numbers const mine = measure_replay(competitors[0], events);
    replay_fragmentation = mine.fragmentation;
    row.push_back(mine.ns_per_pair < 0 ? "failed"
                                       : fixed(mine.ns_per_pair, mine.ns_per_pair < 100 ? 1 : 0));
    for (std::size_t i = 1; i < competitors.size(); ++i) {
      replay_numbers const other = measure_replay(competitors[i], events);
      if (other.fragmentation > 0)
        other_fragmentation +=
            " " + competitors[i].name + " " + fixed(other.fragmentation, 3) + ";";
      row.push_back(other.ns_per_pair < 0 ? "failed"
                                          : with_ratio(other.ns_per_pair, mine.ns_per_pair));
    }
    row.push_back("-");
    row.push_back(fixed(mine.fragmentation, 3));
    results.add(row);
  }
  std::printf("\n");
  results.print();
  std::printf(
      "\ngpumem scaling: throughput at n threads / at 1 thread. fragmentation: gpumem's peak "
      "bytes\n"
      "held / peak bytes live over the replay of %s (%zu events).\n",
      log_path.c_str(), events.size());
  if (!other_fragmentation.empty())
    std::printf("fragmentation of the other pools on the replay:%s\n", other_fragmentation.c_str());
  std::printf("\ngoals (GPU):\n");
  if (only.empty() || only == "mixed") {
    std::printf("  mixed, 1 thread <= 100 ns/pair: %.1f ns -> %s\n", mixed1,
                mixed1 > 0 && mixed1 <= 100 ? "met" : "MISSED");
    double const speedup = mixed16 > 0 ? mixed1 / mixed16 : 0;
    std::printf("  mixed, %d threads >= 8x 1-thread throughput: %.1fx -> %s\n",
                thread_counts.back(), speedup, speedup >= 8 ? "met" : "MISSED");
  }
  if (only.empty() || only == "replay")
    std::printf("  replay fragmentation <= 1.15: %.3f -> %s\n", replay_fragmentation,
                replay_fragmentation > 0 && replay_fragmentation <= 1.15 ? "met" : "MISSED");
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
