// bench_device_heap: in-kernel allocation rates of gpumem's device heap and CUDA's in-kernel
// malloc, measured in the same run, with ratios.
//
// Patterns (every thread of the grid takes part; time from backend events around the kernels):
//   alloc-write-free   each thread allocates one block, writes it, frees it (one kernel)
//   alloc-all          each thread allocates and writes one block and keeps it (rate of this
//                      kernel); a second kernel frees them all (its time goes in free-all)
//   churn              each thread repeats allocate / write / free `rounds` times, with a fixed
//                      16 B size and with random sizes in 16..4096 B; rate in alloc+free pairs
//                      per second
//
// Sizes 16, 64, 256, 1024 B at 64K and 1M threads. CUDA's malloc is far slower at the larger
// sizes, so where it would take seconds it runs fewer threads (the table says how many): the rate
// is still allocations per second. On the host backend everything is scaled down to a smoke test.
//
//   bench_device_heap            (GPUMEM_DEVICE=cuda|host)
#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace nrt = gpumem::nrt;

namespace {

GPUMEM_HD std::uint32_t next_random(std::uint32_t& state) {
  state = state * 1664525u + 1013904223u;
  return state >> 8;
}

GPUMEM_HD void touch(void* p, std::size_t bytes, unsigned long long value) {
  // One word at each end: enough to make the block real without measuring memset.
  auto* words = static_cast<unsigned long long*>(p);
  words[0] = value;
  if (bytes >= 16) words[bytes / 8 - 1] = value;
}

struct alloc_write_free {
  nrt::heap_ref heap;
  std::size_t bytes;
  unsigned long long n;
  unsigned long long* failures;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* p = nrt::detail::heap_allocate(heap, bytes);
    if (p == nullptr) {
      gpumem::atomic_fetch_add(failures, 1ull, gpumem::mem_order::relaxed);
      return;
    }
    touch(p, bytes, t.global());
    nrt::detail::heap_deallocate(heap, p);
  }
};

struct alloc_all {
  nrt::heap_ref heap;
  std::size_t bytes;
  unsigned long long n;
  void** out;
  unsigned long long* failures;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* p = nrt::detail::heap_allocate(heap, bytes);
    out[t.global()] = p;
    if (p == nullptr) {
      gpumem::atomic_fetch_add(failures, 1ull, gpumem::mem_order::relaxed);
      return;
    }
    touch(p, bytes, t.global());
  }
};

struct free_all {
  nrt::heap_ref heap;
  unsigned long long n;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) nrt::detail::heap_deallocate(heap, out[t.global()]);
  }
};

struct churn {
  nrt::heap_ref heap;
  std::size_t bytes;  // 0: random 16..4096
  unsigned rounds;
  unsigned long long n;
  unsigned long long* failures;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    auto rng = static_cast<std::uint32_t>(t.global() * 2654435761u + 7u);
    for (unsigned r = 0; r < rounds; ++r) {
      std::size_t const size = bytes != 0 ? bytes : 16 + next_random(rng) % (4096 - 16 + 1);
      void* p = nrt::detail::heap_allocate(heap, size);
      if (p == nullptr) {
        gpumem::atomic_fetch_add(failures, 1ull, gpumem::mem_order::relaxed);
        continue;
      }
      touch(p, size, r);
      nrt::detail::heap_deallocate(heap, p);
    }
  }
};

class timer {
 public:
  timer()
      : start_(gpumem::backend().create_event(true)), stop_(gpumem::backend().create_event(true)) {}
  ~timer() {
    gpumem::backend().destroy_event(start_);
    gpumem::backend().destroy_event(stop_);
  }
  template <class F>
  double ms(F&& enqueue) {
    gpumem::backend().record_event(start_, nullptr);
    enqueue();
    gpumem::backend().record_event(stop_, nullptr);
    gpumem::backend().synchronize_event(stop_);
    return gpumem::backend().elapsed_ms(start_, stop_);
  }

 private:
  gpumem::event_handle start_;
  gpumem::event_handle stop_;
};

constexpr unsigned block_size = 256;

gpumem::launch_config grid_for(unsigned long long n) {
  return {static_cast<unsigned>((n + block_size - 1) / block_size), block_size};
}

struct measurement {
  double per_second = 0;  // operations per second
  unsigned long long threads = 0;
  unsigned long long failures = 0;
};

struct bench_context {
  void** pointers;
  unsigned long long* failures;
  timer clock;
  int repeats;
};

unsigned long long read_failures(unsigned long long* failures) {
  unsigned long long f = 0;
  gpumem::backend().synchronize();
  gpumem::backend().copy(&f, failures, sizeof(f));
  gpumem::backend().fill(failures, 0, sizeof(f));
  return f;
}

// Best of `repeats` (after one warm-up run), in operations per second.
template <class Run>
measurement best_of(bench_context& b, unsigned long long ops, Run run) {
  measurement m;
  run();  // warm-up: slabs acquired, caches and code loaded
  read_failures(b.failures);
  double best = 1e300;
  for (int r = 0; r < b.repeats; ++r)
    best = std::min(best, run());
  m.failures = read_failures(b.failures);
  m.per_second = ops / (best / 1e3);
  return m;
}

measurement run_pattern(bench_context& b, nrt::device_heap& heap, std::string const& pattern,
                        std::size_t bytes, unsigned long long threads, unsigned rounds) {
  nrt::heap_ref const h = heap.handle();
  measurement m;
  if (pattern == "alloc-write-free") {
    m = best_of(b, threads, [&] {
      return b.clock.ms([&] {
        gpumem::launch(grid_for(threads), alloc_write_free{h, bytes, threads, b.failures});
      });
    });
  } else if (pattern == "alloc-all" || pattern == "free-all") {
    bool const time_free = pattern == "free-all";
    m = best_of(b, threads, [&] {
      double const a = b.clock.ms([&] {
        gpumem::launch(grid_for(threads), alloc_all{h, bytes, threads, b.pointers, b.failures});
      });
      double const f = b.clock.ms([&] {
        gpumem::launch(grid_for(threads), free_all{h, threads, b.pointers});
      });
      return time_free ? f : a;
    });
  } else {
    m = best_of(b, threads * rounds, [&] {
      return b.clock.ms([&] {
        gpumem::launch(grid_for(threads), churn{h, bytes, rounds, threads, b.failures});
      });
    });
  }
  m.threads = threads;
  try {
    heap.check();
  } catch (std::exception const& e) {
    std::printf("  note: %s\n", e.what());
  }
  return m;
}

std::string rate_text(measurement const& m) {
  char text[96];
  std::snprintf(text, sizeof(text), "%9.4f G/s", m.per_second / 1e9);
  std::string s = text;
  if (m.failures != 0) s += " (" + std::to_string(m.failures) + " null)";
  return s;
}

}  // namespace

int main() {
  try {
    bool const gpu = gpumem::backend().kind() == gpumem::backend_kind::cuda;
    std::printf("bench_device_heap\ndevice: %s\n", gpumem::backend().description().c_str());
    unsigned long long const small_threads = gpu ? 64ull << 10 : 1ull << 10;
    unsigned long long const big_threads = gpu ? 1ull << 20 : 4ull << 10;
    // CUDA's malloc at >= 256 B and 1M threads would take seconds per run: cap its thread count.
    unsigned long long const malloc_cap_large = gpu ? 128ull << 10 : big_threads;
    unsigned const gpumem_rounds = gpu ? 32 : 4;
    unsigned const malloc_rounds = gpu ? 4 : 2;
    std::size_t const heap_bytes = gpu ? 4 * gpumem::GiB : 256 * gpumem::MiB;

    // CUDA's malloc heap must be sized before the first kernel that uses malloc: make it first.
    nrt::heap_options malloc_options;
    malloc_options.kind = nrt::heap_kind::cuda_malloc;
    malloc_options.bytes = gpu ? 2 * gpumem::GiB : 256 * gpumem::MiB;
    nrt::device_heap cuda_heap(malloc_options);
    nrt::heap_options options;
    options.bytes = heap_bytes;
    nrt::device_heap heap(options);
    std::printf("gpumem heap: %s, slabs of %s, %u shards; %s\n", heap.name().c_str(),
                gpumem::format_bytes(heap.slab_bytes()).c_str(), heap.shards(),
                cuda_heap.name().c_str());

    void* pointers = gpumem::backend().allocate(big_threads * sizeof(void*));
    auto* failures = static_cast<unsigned long long*>(gpumem::backend().allocate(256));
    gpumem::backend().fill(failures, 0, 256);
    bench_context b{static_cast<void**>(pointers), failures, {}, gpu ? 3 : 1};
    bench_context bm{static_cast<void**>(pointers), failures, {}, 1};

    std::printf("\n%-17s %6s %9s %22s %30s %9s\n", "pattern", "bytes", "threads", "gpumem heap",
                "cuda malloc (threads)", "ratio");
    std::vector<std::string> const patterns{"alloc-write-free", "alloc-all", "free-all"};
    std::vector<std::size_t> const sizes{16, 64, 256, 1024};
    for (std::string const& pattern : patterns) {
      for (std::size_t bytes : sizes) {
        for (unsigned long long threads : {small_threads, big_threads}) {
          measurement const g = run_pattern(b, heap, pattern, bytes, threads, 0);
          unsigned long long const mt =
              bytes >= 256 ? std::min(threads, malloc_cap_large) : threads;
          measurement const c = run_pattern(bm, cuda_heap, pattern, bytes, mt, 0);
          std::printf("%-17s %6zu %9llu %22s %20s (%7llu) %8.1fx\n", pattern.c_str(), bytes,
                      threads, rate_text(g).c_str(), rate_text(c).c_str(), c.threads,
                      c.per_second > 0 ? g.per_second / c.per_second : 0.0);
          std::fflush(stdout);
        }
      }
    }
    std::printf("\nchurn: alloc+free pairs per second (gpumem %u rounds, cuda malloc %u rounds)\n",
                gpumem_rounds, malloc_rounds);
    for (std::size_t bytes : {std::size_t{16}, std::size_t{0}}) {
      for (unsigned long long threads : {small_threads, big_threads}) {
        measurement const g = run_pattern(b, heap, "churn", bytes, threads, gpumem_rounds);
        unsigned long long const mt = bytes == 0 ? std::min(threads, malloc_cap_large) : threads;
        measurement const c = run_pattern(bm, cuda_heap, "churn", bytes, mt, malloc_rounds);
        std::printf("%-17s %6s %9llu %22s %20s (%7llu) %8.1fx\n", "churn",
                    bytes == 0 ? "16-4K" : "16", threads, rate_text(g).c_str(),
                    rate_text(c).c_str(), c.threads,
                    c.per_second > 0 ? g.per_second / c.per_second : 0.0);
        std::fflush(stdout);
      }
    }
    gpumem::backend().deallocate(pointers);
    gpumem::backend().deallocate(failures);
    heap.trim();
    std::printf("\ngpumem heap after the run: %s held (peak %s)\n",
                gpumem::format_bytes(heap.usage().used_bytes).c_str(),
                gpumem::format_bytes(heap.usage().peak_bytes).c_str());
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_device_heap: %s\n", e.what());
    return 1;
  }
}
