// bench_spill: spilling and unspilling throughput of gpumem's spill_manager against the copy
// bandwidth of the device measured in the same run:
//
//   pinned          one cudaMemcpyAsync of the whole set, device <-> pinned host (each direction)
//   pageable        the same into / from ordinary (pageable) host memory
//   pinned both     both directions at once on two streams (bytes of both / time)
//   spill           spill_device_memory(all): whole buffers into the pinned host pool
//   unspill         every buffer brought back (a spill_lock holding each, one thread)
//   spill+unspill   half the bytes spilled by one thread while another unspills the other half
//
// Sets of 1 GiB and 8 GiB of buffers of 64 KiB to 256 MiB (powers of four, in turn, until the set
// is full). The manager's pool and copy streams are warmed by one untimed round, so pinning is not
// measured (it must not be on the spill path). Device memory comes from the pool manager, so an
// unspill costs no cudaMalloc. Goals: spill and unspill each >= 90 % of the pinned copy bandwidth;
// both at once >= 90 % of the bidirectional pinned bandwidth. On the host backend the sets are
// scaled down to a smoke test (the numbers are the simulator's).
//
//   bench_spill [MiB ...]        (GPUMEM_DEVICE=cuda|host; default 1024 8192, host: 8 32)
#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include "support/bench_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

using gpumem::GiB;
using gpumem::KiB;
using gpumem::MiB;
using gpumem::bench::stopwatch;

double gbps(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

// Buffer sizes from 64 KiB to `largest`, powers of four in turn, adding up to `total`.
std::vector<std::size_t> buffer_sizes(std::size_t total, std::size_t largest) {
  std::vector<std::size_t> sizes;
  std::size_t sum = 0;
  std::size_t next = 64 * KiB;
  while (sum < total) {
    std::size_t const n = std::min(next, total - sum);
    sizes.push_back(n);
    sum += n;
    next = next >= largest ? 64 * KiB : next * 4;
  }
  return sizes;
}

struct reference {
  double to_host_pinned = 0, to_device_pinned = 0, both_pinned = 0;
  double to_host_pageable = 0, to_device_pageable = 0;
};

reference measure_copies(std::size_t total) {
  gpumem::device_backend& b = gpumem::backend();
  reference r;
  void* d1 = b.allocate(total);
  void* d2 = b.allocate(total);
  void* h1 = b.allocate_pinned(total, gpumem::host_alloc_flags{});
  void* h2 = b.allocate_pinned(total, gpumem::host_alloc_flags{});
  std::vector<unsigned char> pageable(total);
  gpumem::stream_handle s1 = b.create_stream(true);
  gpumem::stream_handle s2 = b.create_stream(true);
  auto timed = [&](auto body) {
    body();  // warm
    b.synchronize();
    stopwatch w;
    body();
    b.synchronize();
    return w.seconds();
  };
  r.to_host_pinned = gbps(total, timed([&] { b.copy_async(h1, d1, total, s1); }));
  r.to_device_pinned = gbps(total, timed([&] { b.copy_async(d1, h1, total, s1); }));
  r.both_pinned = gbps(2 * total, timed([&] {
                         b.copy_async(h1, d1, total, s1);
                         b.copy_async(d2, h2, total, s2);
                       }));
  r.to_host_pageable = gbps(total, timed([&] { b.copy_async(pageable.data(), d1, total, s1); }));
  r.to_device_pageable = gbps(total, timed([&] { b.copy_async(d1, pageable.data(), total, s1); }));
  b.destroy_stream(s1);
  b.destroy_stream(s2);
  b.deallocate_pinned(h1);
  b.deallocate_pinned(h2);
  b.deallocate(d1);
  b.deallocate(d2);
  return r;
}

struct spill_rates {
  double spill = 0, unspill = 0, both = 0;
};

void unspill_all(std::vector<gpumem::buffer> const& buffers, std::size_t first, std::size_t step) {
  for (std::size_t i = first; i < buffers.size(); i += step) {
    gpumem::spill_lock lock;
    lock.hold(buffers[i]);
  }
}

spill_rates measure_spilling(std::size_t total, std::size_t largest) {
  gpumem::spill_options o;
  o.spill_on_demand = false;
  o.host_pool_growth = std::max<std::size_t>(total / 4, 64 * MiB);
  gpumem::spill_manager m(o);
  std::vector<gpumem::buffer> buffers;
  for (std::size_t n : buffer_sizes(total, largest))
    buffers.push_back(m.allocate(n));
  spill_rates r;
  for (int round = 0; round < 2; ++round) {  // round 0 warms the pool: pinning is not timed
    gpumem::backend().synchronize();
    stopwatch w;
    std::size_t const spilled = m.spill_device_memory(total);
    double const spill_s = w.seconds();
    w.restart();
    unspill_all(buffers, 0, 1);
    double const unspill_s = w.seconds();
    r.spill = gbps(spilled, spill_s);
    r.unspill = gbps(total, unspill_s);
  }
  // Both at once: the buffers are split into two groups of (nearly) equal bytes, largest first
  // into the lighter group, as the pinned reference moves equal bytes each way (with the
  // alternate buffers of a mixed-size set, one direction would run alone at the end and the
  // figure would measure the imbalance, not the overlap). The "in" group is spilled first; then
  // one thread spills the "out" group while another unspills the "in" group.
  std::vector<std::size_t> order(buffers.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return buffers[a].size() > buffers[b].size(); });
  std::vector<std::size_t> out_group, in_group;
  std::size_t out_bytes = 0, in_bytes = 0;
  for (std::size_t i : order) {
    bool const to_out = out_bytes <= in_bytes;
    (to_out ? out_group : in_group).push_back(i);
    (to_out ? out_bytes : in_bytes) += buffers[i].size();
  }
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i : in_group)
      m.spill(buffers[i]);
    gpumem::backend().synchronize();
    stopwatch w;
    std::thread spiller([&] {
      for (std::size_t i : out_group)
        m.spill(buffers[i]);
    });
    std::thread unspiller([&] {
      for (std::size_t i : in_group) {
        gpumem::spill_lock lock;
        lock.hold(buffers[i]);
      }
    });
    spiller.join();
    unspiller.join();
    r.both = gbps(out_bytes + in_bytes, w.seconds());
    unspill_all(buffers, 0, 1);
  }
  return r;
}

std::string pct(double value, double reference) {
  return reference > 0 ? gpumem::bench::fixed(100.0 * value / reference, 1) + " %" : "n/a";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool const on_cuda = gpumem::backend().kind() == gpumem::backend_kind::cuda;
    std::vector<std::size_t> totals;
    for (int i = 1; i < argc; ++i)
      totals.push_back(std::strtoull(argv[i], nullptr, 10) * MiB);
    if (totals.empty())
      totals = on_cuda ? std::vector<std::size_t>{1 * GiB, 8 * GiB}
                       : std::vector<std::size_t>{8 * MiB, 32 * MiB};
    std::size_t const largest = on_cuda ? 256 * MiB : 1 * MiB;
    gpumem::set_memory_manager(gpumem::load_memory_manager("pool"));
    std::printf("bench_spill\ndevice: %s\n", gpumem::bench::device_line().c_str());
    std::printf("buffers: 64 KiB to %s, powers of four in turn\n",
                gpumem::format_bytes(largest).c_str());
    bool all_met = true;
    for (std::size_t total : totals) {
      reference const ref = measure_copies(total);
      spill_rates const s = measure_spilling(total, largest);
      std::printf("\nset of %s (%zu buffers)\n", gpumem::format_bytes(total).c_str(),
                  buffer_sizes(total, largest).size());
      std::printf(
          "  pinned   copy  gpu => cpu %8.2f GB/s   cpu => gpu %8.2f GB/s   both %8.2f GB/s\n",
          ref.to_host_pinned, ref.to_device_pinned, ref.both_pinned);
      std::printf("  pageable copy  gpu => cpu %8.2f GB/s   cpu => gpu %8.2f GB/s\n",
                  ref.to_host_pageable, ref.to_device_pageable);
      std::printf("  spill          gpu => cpu %8.2f GB/s (%s of pinned, %s of pageable)\n",
                  s.spill, pct(s.spill, ref.to_host_pinned).c_str(),
                  pct(s.spill, ref.to_host_pageable).c_str());
      std::printf("  unspill        cpu => gpu %8.2f GB/s (%s of pinned, %s of pageable)\n",
                  s.unspill, pct(s.unspill, ref.to_device_pinned).c_str(),
                  pct(s.unspill, ref.to_device_pageable).c_str());
      std::printf("  spill+unspill  both       %8.2f GB/s (%s of pinned both)\n", s.both,
                  pct(s.both, ref.both_pinned).c_str());
      bool const spill_ok = s.spill >= 0.9 * ref.to_host_pinned;
      bool const unspill_ok = s.unspill >= 0.9 * ref.to_device_pinned;
      bool const both_ok = s.both >= 0.9 * ref.both_pinned;
      std::printf("  goal spill >= 90 %% of pinned: %s; unspill: %s; both at once: %s\n",
                  spill_ok ? "met" : "NOT met", unspill_ok ? "met" : "NOT met",
                  both_ok ? "met" : "NOT met");
      all_met = all_met && spill_ok && unspill_ok && both_ok;
    }
    std::printf("\n%s\n", on_cuda ? (all_met ? "all goals met" : "some goals NOT met")
                                  : "host backend: a smoke test, goals not judged");
    gpumem::close();
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_spill: %s\n", e.what());
    return 1;
  }
}
