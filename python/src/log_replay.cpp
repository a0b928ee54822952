// gpumem.replay_log: a CSV allocation log (RMM's format) replayed against a fresh pool or the
// backend's plain allocations, with the pool's held bytes after every event (python -m gpumem.plot
// draws them beside the log's own timeline).
#include <gpumem/core/error.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "module.hpp"

namespace gpumem::python {
namespace {

using namespace nb::literals;

// Replays a CSV log against a fresh manager-like stack: "pool" (with options) or "cuda" (the
// backend's plain allocations). Returns the result's fields and the pool's held bytes after every
// replayed event (empty for "cuda").
nb::dict replay_file(std::string const& path, std::string const& target, pool_options const& opts,
                     bool honour_streams) {
  // The arguments first: a bad target is named whatever the log holds.
  GPUMEM_EXPECTS(target == "pool" || target == "cuda",
                 "replay_log: target must be 'pool' or 'cuda', not '" + target + "'");
  std::vector<log_event> const events = parse_log_file(path);
  cuda_resource upstream;
  std::optional<pool_resource> pool;
  memory_resource* resource = &upstream;
  std::vector<std::size_t> held;
  replay_options options;
  options.honour_streams = honour_streams;
  if (target == "pool") {
    pool.emplace(upstream, opts);
    resource = &*pool;
    options.held_bytes = [&] {
      std::size_t const h = pool->statistics().held_bytes;
      held.push_back(h);
      return h;
    };
  }
  // The replay's streams are ours, made before and destroyed after the pool (which keeps state
  // per stream until release_stream): up to 8, shared round-robin by the logged streams.
  std::vector<stream_handle> streams;
  if (honour_streams) {
    for (int i = 0; i < 8; ++i)
      streams.push_back(backend().create_stream(true));
    options.streams = streams;
  }
  auto release_all = [&] {
    if (pool)
      for (stream_handle s : streams)
        pool->release_stream(s);
    pool.reset();
    for (stream_handle s : streams)
      backend().destroy_stream(s);
  };
  replay_result r;
  try {
    r = replay(events, *resource, options);
  } catch (...) {
    release_all();
    throw;
  }
  release_all();
  nb::dict d;
  d["events"] = r.events;
  d["allocations"] = r.allocations;
  d["frees"] = r.frees;
  d["logged_failures"] = r.logged_failures;
  d["unmatched_frees"] = r.unmatched_frees;
  d["out_of_memory"] = r.out_of_memory;
  d["leftover_allocations"] = r.leftover_allocations;
  d["peak_live_bytes"] = r.peak_live_bytes;
  d["peak_held_bytes"] = r.peak_held_bytes;
  d["fragmentation"] = r.fragmentation();
  d["seconds"] = r.seconds;
  d["held"] = held;
  return d;
}

}  // namespace

void add_log_replay(nb::module_& m) {
  // The log as the replay reads it (one parser for both: python -m gpumem.plot draws what
  // replay_log replays): (time, action, pointer, size, stream) per event, in order.
  m.def(
      "parse_log",
      [](std::string const& path) {
        std::vector<log_event> const events = parse_log_file(path);
        nb::list out;
        for (log_event const& e : events)
          out.append(nb::make_tuple(
              e.time_seconds, to_string(e.action), static_cast<std::uint64_t>(e.pointer),
              static_cast<std::uint64_t>(e.size), static_cast<std::uint64_t>(e.stream)));
        return out;
      },
      "path"_a);
  m.def(
      "replay_log",
      [](std::string const& path, std::string const& target, std::size_t initial_size,
         std::size_t chunk_size, std::optional<std::size_t> maximum_size,
         std::size_t max_cached_size, bool expandable, bool trim_before_growth,
         bool wait_across_streams, bool honour_streams) {
        return replay_file(
            path, target,
            make_pool_options(initial_size, chunk_size, maximum_size, max_cached_size, expandable,
                              trim_before_growth, wait_across_streams),
            honour_streams);
      },
      "path"_a, "target"_a = "pool", "initial_size"_a = 0,
      "chunk_size"_a = pool_options{}.chunk_size, "maximum_size"_a = nb::none(),
      "max_cached_size"_a = pool_options{}.max_cached_size,
      "expandable"_a = pool_options{}.expandable,
      "trim_before_growth"_a = pool_options{}.trim_before_growth,
      "wait_across_streams"_a = pool_options{}.wait_across_streams, "honour_streams"_a = true);
}

}  // namespace gpumem::python
