// replay_log: replays an allocation log (RMM's CSV format, as written by gpumem's logging_adaptor
// or RMM's logging_resource_adaptor) against gpumem resources and prints, per resource, the time,
// the peak live bytes, the peak bytes held from the device and the fragmentation.
//
//   replay_log [--resource cuda|async|pool|expandable|all] [--no-streams] [--threads]
//              [--repeat N] LOG.csv
//
// --threads replays each logged thread on a thread of its own (replay_options::honour_threads).
//
// The held bytes of cuda are measured by a statistics_adaptor between the resource and the device
// (they equal the live bytes); those of the pools are the pools' own peak held bytes (what they
// took from the upstream, or mapped in their range for the expandable pool: its physical memory
// does not come from the upstream). With --repeat N, the time is the best replay's and the held
// bytes the peak over all of them (the first replay starts from an empty pool).
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: replay_log [--resource cuda|async|pool|expandable|all] [--no-streams] "
               "[--threads] [--repeat N] "
               "LOG.csv\n");
}

// Runs the replays with a resource; `pool` is set for gpumem's pools (their held bytes are read
// from their statistics).
using replay_body = std::function<void(gpumem::memory_resource&, gpumem::pool_resource* pool)>;

struct candidate {
  std::string name;
  bool available;  // expandable needs the backend's virtual memory
  // Builds the resource over `device` and runs `body` with it.
  std::function<void(gpumem::memory_resource& device, replay_body const& body)> run;
};

std::vector<candidate> candidates() {
  using namespace gpumem;
  std::vector<candidate> all;
  all.push_back(
      {"cuda", true, [](memory_resource& device, auto const& body) { body(device, nullptr); }});
  all.push_back({"async", true, [](memory_resource&, auto const& body) {
                   // The async pool is the driver's: held bytes are not visible, only live ones.
                   async_resource async;
                   body(async, nullptr);
                 }});
  all.push_back({"pool", true, [](memory_resource& device, auto const& body) {
                   pool_resource pool(device);
                   body(pool, &pool);
                 }});
  all.push_back({"expandable", backend().vmm_granularity() > 0,
                 [](memory_resource& device, auto const& body) {
                   pool_options options;
                   options.expandable = true;
                   pool_resource pool(device, options);
                   body(pool, &pool);
                 }});
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  std::string path;
  bool honour_streams = true;
  bool honour_threads = false;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--resource" && i + 1 < argc) {
      which = argv[++i];
    } else if (arg == "--no-streams") {
      honour_streams = false;
    } else if (arg == "--threads") {
      honour_threads = true;
    } else if (arg == "--repeat" && i + 1 < argc) {
      // A whole number from 1 to INT_MAX, all of it: atoi took "3x" for 3, "abc" for 0 (a bare
      // usage line), and wrapped an overflowing count (undefined behaviour) to a huge one.
      char const* const text = argv[++i];
      char* end = nullptr;
      errno = 0;
      long const n = std::strtol(text, &end, 10);
      if (end == text || *end != '\0' || errno == ERANGE || n < 1 || n > INT_MAX) {
        std::fprintf(stderr, "replay_log: --repeat needs a whole number from 1 to %d, not '%s'\n",
                     INT_MAX, text);
        return 2;
      }
      repeat = static_cast<int>(n);
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else if (!arg.empty() && arg[0] != '-' && path.empty()) {
      path = arg;
    } else {
      std::fprintf(stderr, "replay_log: unknown argument '%s'\n", arg.c_str());
      usage();
      return 2;
    }
  }
  if (path.empty()) {
    usage();
    return 2;
  }
  // Before the log is read: a misspelt resource used to be reported only after the whole log had
  // been parsed and the table's header printed.
  std::vector<candidate> const resources = candidates();
  if (which != "all") {
    auto const named = std::find_if(resources.begin(), resources.end(),
                                    [&](candidate const& c) { return c.name == which; });
    if (named == resources.end()) {
      std::fprintf(stderr, "replay_log: unknown resource '%s'\n", which.c_str());
      usage();
      return 2;
    }
    if (!named->available) {  // expandable without virtual memory
      std::fprintf(stderr, "replay_log: resource '%s' is not available on %s\n", which.c_str(),
                   gpumem::backend().description().c_str());
      return 2;
    }
  }
  try {
    auto const events = gpumem::parse_log_file(path);
    std::printf("device: %s\nlog: %s (%zu events)\n", gpumem::backend().description().c_str(),
                path.c_str(), events.size());
    // The tool owns the replay streams and destroys them after every resource is gone, so that a
    // resource with per-stream state (the pool) never sees a destroyed stream.
    std::set<std::uintptr_t> logged_streams;
    for (auto const& e : events)
      if (e.stream != 0) logged_streams.insert(e.stream);
    std::vector<gpumem::stream_handle> streams;
    for (std::size_t i = 0; honour_streams && i < logged_streams.size(); ++i)
      streams.push_back(gpumem::backend().create_stream(true));
    std::printf("%-8s %12s %14s %14s %8s %10s %6s\n", "resource", "ns/event", "peak live",
                "peak held", "frag", "unmatched", "oom");
    double cuda_ns = 0;
    for (auto const& c : resources) {
      if (!c.available || (which != "all" && which != c.name)) continue;
      gpumem::cuda_resource device;
      gpumem::statistics_adaptor held(device);
      c.run(held, [&](gpumem::memory_resource& mr, gpumem::pool_resource* pool) {
        gpumem::replay_options options;
        options.honour_streams = honour_streams;
        options.streams = streams;
        options.honour_threads = honour_threads;
        if (c.name == "cuda")
          options.held_bytes = [&held] { return static_cast<std::size_t>(held.bytes().current); };
        gpumem::replay_result best;
        std::size_t peak_held = 0;
        for (int r = 0; r < repeat; ++r) {
          auto const result = gpumem::replay(events, mr, options);
          if (r == 0 || result.seconds < best.seconds) best = result;
          peak_held = std::max(peak_held, result.peak_held_bytes);
        }
        best.peak_held_bytes = pool != nullptr ? pool->statistics().peak_held_bytes : peak_held;
        double const ns = best.events == 0 ? 0 : best.seconds * 1e9 / best.events;
        if (c.name == "cuda") cuda_ns = ns;
        std::printf("%-8s %12.1f %14zu %14zu %8.3f %10zu %6zu", c.name.c_str(), ns,
                    best.peak_live_bytes, best.peak_held_bytes, best.fragmentation(),
                    best.unmatched_frees, best.out_of_memory);
        if (cuda_ns > 0 && ns > 0 && c.name != "cuda")
          std::printf("  (cuda/this %.2fx)", cuda_ns / ns);
        std::printf("\n");
      });
    }
    for (auto s : streams)
      gpumem::backend().destroy_stream(s);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "replay_log: %s\n", e.what());
    return 1;
  }
  return 0;
}
