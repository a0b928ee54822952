// The device heap on both backends: churn with patterns checked, the large-block path, requests
// larger than the heap, and CUDA's malloc as a heap. Exhaustion and the slot states are in
// device_heap_exhaustion_test.cu, bad frees in device_heap_frees_test.cu.
#include "device_heap_test_support.hpp"
#include "nrt_support.hpp"

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using gpumem::test::device_array;
namespace nrt = gpumem::nrt;

namespace {

using namespace gpumem::test::heap;

// Each thread keeps up to `live` blocks of random sizes, fills each with its own pattern and checks
// the pattern when it frees the block: any overlap between blocks of different threads shows.
struct churn_kernel {
  static constexpr unsigned max_live = 4;
  nrt::heap_ref heap;
  unsigned iterations;
  std::size_t max_bytes;
  unsigned live;               // blocks each thread holds, at most max_live
  unsigned long long* errors;  // [0] nulls, [1] corrupt, [2] misaligned
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    unsigned char* blocks[max_live] = {};
    std::size_t sizes[max_live] = {};
    auto rng = static_cast<std::uint32_t>(t.global() * 2654435761u + 12345u);
    for (unsigned it = 0; it < iterations; ++it) {
      unsigned const k = it % live;
      auto const tag = static_cast<unsigned char>(t.global() * 31 + k);
      if (blocks[k] != nullptr) {
        if (!block_holds(blocks[k], sizes[k], tag)) gpumem::atomic_fetch_add(&errors[1], 1ull);
        nrt::detail::heap_deallocate(heap, blocks[k]);
      }
      sizes[k] = pick_size(rng, max_bytes);
      blocks[k] = static_cast<unsigned char*>(nrt::detail::heap_allocate(heap, sizes[k]));
      if (blocks[k] == nullptr) {
        gpumem::atomic_fetch_add(&errors[0], 1ull);
        continue;
      }
      if (reinterpret_cast<std::uintptr_t>(blocks[k]) % natural_alignment(sizes[k]) != 0)
        gpumem::atomic_fetch_add(&errors[2], 1ull);
      fill_block(blocks[k], sizes[k], tag);
    }
    for (unsigned k = 0; k < live; ++k) {
      if (blocks[k] == nullptr) continue;
      auto const tag = static_cast<unsigned char>(t.global() * 31 + k);
      if (!block_holds(blocks[k], sizes[k], tag)) gpumem::atomic_fetch_add(&errors[1], 1ull);
      nrt::detail::heap_deallocate(heap, blocks[k]);
    }
  }
};

struct churn_shape {
  gpumem::launch_config grid{32, 64};
  unsigned live = 4;
  std::size_t heap_bytes = 64 * gpumem::MiB;
};

// On the device every thread of the grid holds its `live` blocks at once, so the heap must hold
// threads x live blocks (and the slabs they pin) with room to spare: the heap sizes below are.
void run_churn(std::size_t max_bytes, unsigned iterations, churn_shape const& shape = {}) {
  nrt::device_heap heap(nrt::heap_options{shape.heap_bytes});
  device_array<unsigned long long> errors(3);
  gpumem::launch(shape.grid,
                 churn_kernel{heap.handle(), iterations, max_bytes, shape.live, errors.data()});
  std::vector<unsigned long long> const e = errors.to_host();
  EXPECT_EQ(e[0], 0u) << "allocations failed on a heap far larger than the live set";
  EXPECT_EQ(e[1], 0u) << "blocks overlapped or were handed out twice";
  EXPECT_EQ(e[2], 0u) << "blocks not naturally aligned";
  EXPECT_NO_THROW(heap.check());
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
  EXPECT_GT(heap.usage().peak_bytes, 0u);
}

TEST(device_heap, churn_small_blocks) {
  run_churn(256, 48);
}

TEST(device_heap, churn_mixed_blocks_up_to_4_kib) {
  run_churn(4096, 24);
}

// 256 threads x 2 live blocks of up to 3 slabs: at most 1536 slabs of large runs plus at most one
// pinned slab per small block and one current slab per (class, shard) slot (58 shards here), in a
// heap of 5119 slabs. That leaves more free slabs than twice the number of gaps the live items can
// make, so some gap of 3 always exists: a null here is a heap bug, not exhaustion. (The first
// version ran 2048 threads x 4 blocks, about 14000 slabs of demand on the device, in 511 slabs.)
TEST(device_heap, churn_with_large_blocks) {
  churn_shape shape;
  shape.grid = {8, 32};
  shape.live = 2;
  shape.heap_bytes = 640 * gpumem::MiB;
  run_churn(300 * 1024, 6, shape);
}

// Each thread keeps one large block of up to `max_slabs` slabs at a time and marks its first and
// last bytes, so overlapping runs show.
struct large_race_kernel {
  nrt::heap_ref heap;
  unsigned iterations;
  std::size_t max_slabs;
  unsigned long long* errors;  // [0] nulls, [1] overlaps
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    std::size_t const span = (max_slabs << heap.slab_shift) - nrt::detail::max_small_block;
    auto rng = static_cast<std::uint32_t>(t.global() * 2246822519u + 7u);
    for (unsigned it = 0; it < iterations; ++it) {
      std::size_t const bytes = nrt::detail::max_small_block + 1 + next_random(rng) % span;
      auto* const p = static_cast<unsigned char*>(nrt::detail::heap_allocate(heap, bytes));
      if (p == nullptr) {
        gpumem::atomic_fetch_add(&errors[0], 1ull);
        continue;
      }
      auto const tag = static_cast<unsigned char>(t.global() * 7 + it);
      fill_block(p, 64, tag);
      fill_block(p + bytes - 64, 64, tag);
      if (!block_holds(p, 64, tag) || !block_holds(p + bytes - 64, 64, tag))
        gpumem::atomic_fetch_add(&errors[1], 1ull);
      nrt::detail::heap_deallocate(heap, p);
    }
  }
};

// `threads` threads race for large blocks on a heap just big enough that every request can be met:
//   * blocks of one slab: `threads` slabs (a thread that asks holds none, so one is free);
//   * blocks of 1..3 slabs: with k = threads - 1 other runs live, 3k + 2(k + 1) + 1 slabs always
//     leave a gap of 3 (k runs make at most k + 1 gaps; were each under 3, at most 2(k + 1) free).
// So every null is a failure under contention, not exhaustion. On the device every thread of the
// grid runs at once; on the host backend the test runs its own host threads, more than the cores,
// so that threads are often preempted in the middle of a claim (as warps delay each other on the
// device).
void race_large_requests(std::size_t max_slabs) {
  bool const device = gpumem::backend().kind() == gpumem::backend_kind::cuda;
  unsigned const threads = device ? 1024 : 64;
  unsigned const iterations = device ? 200 : 5000;
  std::size_t const k = threads - 1;
  std::size_t const needed = max_slabs == 1 ? threads : 3 * k + 2 * (k + 1) + 1;
  nrt::heap_options options;
  options.slab_bytes = 128 * gpumem::KiB;
  // + the metadata, and the freed bits of a checked heap (GPUMEM_DEBUG_MEMORY=1).
  options.bytes =
      needed * options.slab_bytes + 64 * gpumem::KiB + needed * options.slab_bytes / 128;
  nrt::device_heap heap(options);
  ASSERT_GE(heap.capacity() / heap.slab_bytes(), needed);
  device_array<unsigned long long> errors(2);
  large_race_kernel const kernel{heap.handle(), iterations, max_slabs, errors.data()};
  if (device) {
    gpumem::launch({threads, 1}, kernel);
  } else {
    std::atomic<bool> go{false};  // start together, or the first threads finish alone
    std::vector<std::thread> pool;
    for (unsigned b = 0; b < threads; ++b) {
      pool.emplace_back([&kernel, &go, b, threads] {
        while (!go.load())
          std::this_thread::yield();
        kernel(gpumem::thread_index{b, 0, threads, 1});
      });
    }
    go.store(true);
    for (std::thread& t : pool)
      t.join();
  }
  std::vector<unsigned long long> const e = errors.to_host();
  EXPECT_EQ(e[0], 0u) << "large allocations failed while the heap could meet them ("
                      << heap.capacity() / heap.slab_bytes() << " slabs, " << threads
                      << " threads)";
  EXPECT_EQ(e[1], 0u) << "runs overlapped";
  EXPECT_NO_THROW(heap.check());
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
}

TEST(device_heap, racing_one_slab_requests_never_fail_while_a_slab_is_free) {
  race_large_requests(1);
}

TEST(device_heap, racing_multi_slab_requests_never_fail_while_a_run_is_free) {
  race_large_requests(3);
}

// One thread: fills the heap with one-slab blocks, frees slabs 62..65 (a gap across a bitmap word
// boundary), 100..102 and four single slabs, then asks for 4 slabs (must be 62, first fit), then 4
// more (7 free but at most 3 in a row: null after its bounded passes, as the free count says a
// run might exist), then 3 (must be 100).
struct fragment_kernel {
  nrt::heap_ref heap;
  void** blocks;            // [slab_count]
  unsigned long long* out;  // [0] blocks taken, [1] slab of the 4-run, [2] second 4-run, [3] 3-run
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    std::size_t const slab = std::size_t{1} << heap.slab_shift;
    unsigned long long taken = 0;
    for (std::uint32_t i = 0; i < heap.slab_count; ++i) {
      blocks[i] = nrt::detail::heap_allocate(heap, slab);
      if (blocks[i] != nullptr) ++taken;
    }
    out[0] = taken;
    std::uint32_t const freed[] = {62, 63, 64, 65, 100, 101, 102, 150, 152, 154, 156};
    for (std::uint32_t const i : freed) {
      nrt::detail::heap_deallocate(heap, blocks[i]);
      blocks[i] = nullptr;
    }
    auto slab_of = [&](void* p) -> unsigned long long {
      if (p == nullptr) return ~0ull;
      return static_cast<unsigned long long>(static_cast<char*>(p) - heap.slabs) >> heap.slab_shift;
    };
    void* const four = nrt::detail::heap_allocate(heap, 4 * slab);
    out[1] = slab_of(four);
    void* const again = nrt::detail::heap_allocate(heap, 3 * slab + 1);
    out[2] = slab_of(again);
    void* const three = nrt::detail::heap_allocate(heap, 3 * slab);
    out[3] = slab_of(three);
    nrt::detail::heap_deallocate(heap, four);
    nrt::detail::heap_deallocate(heap, again);
    nrt::detail::heap_deallocate(heap, three);
    for (std::uint32_t i = 0; i < heap.slab_count; ++i)
      nrt::detail::heap_deallocate(heap, blocks[i]);
  }
};

TEST(device_heap, large_runs_are_first_fit_across_words_and_fragmentation_fails_cleanly) {
  nrt::heap_options options;
  options.bytes = 200 * 128 * gpumem::KiB;
  options.slab_bytes = 128 * gpumem::KiB;
  options.shards = 1;
  nrt::device_heap heap(options);
  std::size_t const slabs = heap.capacity() / heap.slab_bytes();
  ASSERT_GT(slabs, 157u);
  device_array<void*> blocks(slabs);
  device_array<unsigned long long> out(4);
  gpumem::launch({1, 1}, fragment_kernel{heap.handle(), blocks.data(), out.data()});
  std::vector<unsigned long long> const r = out.to_host();
  EXPECT_EQ(r[0], slabs) << "the empty heap did not give every slab";
  EXPECT_EQ(r[1], 62u) << "the 4-slab run across the word boundary was not found first";
  EXPECT_EQ(r[2], ~0ull) << "a 4-slab run was handed out where only 3 were free";
  EXPECT_EQ(r[3], 100u);
  try {
    heap.check();
    FAIL() << "check() should report the fragmented request";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 3 * heap.slab_bytes() + 1);
  }
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
}

TEST(device_heap, a_request_larger_than_the_heap_fails_cleanly) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  device_array<void*> out(1);
  device_array<unsigned long long> count(1);
  gpumem::launch({1, 1},
                 allocate_each{heap.handle(), 3 * gpumem::MiB, 1, out.data(), count.data()});
  EXPECT_EQ(out.to_host()[0], nullptr);
  EXPECT_THROW(heap.check(), gpumem::out_of_memory);
}

// The public device API (nrt::allocate / nrt::deallocate): each thread takes a small and a large
// block, marks both and checks them before giving them back; thread 0 also asks for more than the
// heap (null, reported by check()) and frees null (nothing happens).
struct public_api_kernel {
  static constexpr std::size_t small_bytes = 48;
  static constexpr std::size_t large_bytes = 200 * 1024;  // two slabs
  nrt::heap_ref heap;
  std::size_t too_large;
  unsigned long long* errors;  // [0] nulls, [1] corrupt, [2] the oversized request succeeded
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    auto* const small = static_cast<unsigned char*>(nrt::allocate(heap, small_bytes));
    auto* const large = static_cast<unsigned char*>(nrt::allocate(heap, large_bytes));
    auto const tag = static_cast<unsigned char>(t.global());
    if (small == nullptr || large == nullptr) gpumem::atomic_fetch_add(&errors[0], 1ull);
    if (small != nullptr) fill_block(small, small_bytes, tag);
    if (large != nullptr) fill_block(large + large_bytes - 64, 64, tag);
    if ((small != nullptr && !block_holds(small, small_bytes, tag)) ||
        (large != nullptr && !block_holds(large + large_bytes - 64, 64, tag)))
      gpumem::atomic_fetch_add(&errors[1], 1ull);
    nrt::deallocate(heap, small);
    nrt::deallocate(heap, large);
    if (t.global() != 0) return;
    void* const huge = nrt::allocate(heap, too_large);
    if (huge != nullptr) gpumem::atomic_fetch_add(&errors[2], 1ull);
    nrt::deallocate(heap, huge);
  }
};

TEST(device_heap, the_public_device_api_allocates_frees_and_reports_exhaustion) {
  // 64 threads x (two slabs + a small block) at once on the device: 64 MiB holds 500 slabs.
  nrt::device_heap heap(nrt::heap_options{64 * gpumem::MiB});
  std::size_t const too_large = heap.capacity() + 1;
  device_array<unsigned long long> errors(3);
  gpumem::launch({4, 16}, public_api_kernel{heap.handle(), too_large, errors.data()});
  std::vector<unsigned long long> const e = errors.to_host();
  EXPECT_EQ(e[0], 0u) << "allocations failed on a heap far larger than the live set";
  EXPECT_EQ(e[1], 0u) << "a block did not hold what its thread wrote";
  EXPECT_EQ(e[2], 0u) << "a request larger than the heap was served";
  try {
    heap.check();
    FAIL() << "check() should report the request larger than the heap";
  } catch (gpumem::out_of_memory const& ex) {
    EXPECT_EQ(ex.requested_bytes(), too_large);
  }
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
}

// Sizes no heap can serve: SIZE_MAX and those whose round-up to whole slabs would wrap, 2^63 and
// past it, and 2^62 + 1. Thread 0 holds a small and a large live block, asks for each, and checks
// that the live blocks kept their contents; every answer must be null (a wrapped size used to
// become a run of 0 slabs, "found" on a free slab and handed out).
struct wrapping_sizes_kernel {
  nrt::heap_ref heap;
  unsigned long long* out;  // [0] non-null answers, [1] live blocks overwritten, [2] first size
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    std::size_t const top = ~std::size_t{0};
    std::size_t const slab = std::size_t{1} << heap.slab_shift;
    std::size_t const half = std::size_t{1} << 63;
    std::size_t const sizes[] = {top,
                                 top - 1,
                                 top - 15,
                                 top - (slab - 1),
                                 top - slab,
                                 half,
                                 half + 1,
                                 gpumem::max_allocation_bytes,
                                 (std::size_t{1} << 62) + 1};
    auto* const small = static_cast<unsigned char*>(nrt::allocate(heap, 48));
    auto* const large = static_cast<unsigned char*>(nrt::allocate(heap, slab + 1));
    if (small == nullptr || large == nullptr) {
      out[1] = 1000;
      return;
    }
    fill_block(small, 48, 7);
    fill_block(large, slab + 1, 9);
    out[2] = sizes[0];
    for (std::size_t const bytes : sizes) {
      void* const p = nrt::allocate(heap, bytes);
      if (p != nullptr) out[0] += 1;  // not freed: it may overlap the live blocks
    }
    if (!block_holds(small, 48, 7) || !block_holds(large, slab + 1, 9)) out[1] = 1;
    nrt::deallocate(heap, small);
    nrt::deallocate(heap, large);
  }
};

TEST(device_heap, sizes_that_would_wrap_give_null_and_report_out_of_memory) {
  nrt::heap_options options;
  options.bytes = 4 * gpumem::MiB;
  options.slab_bytes = 64 * gpumem::KiB;
  nrt::device_heap heap(options);
  device_array<unsigned long long> out(3);
  gpumem::launch({1, 1}, wrapping_sizes_kernel{heap.handle(), out.data()});
  std::vector<unsigned long long> const r = out.to_host();
  EXPECT_EQ(r[0], 0u) << "a size that cannot be served was given memory";
  EXPECT_EQ(r[1], 0u) << "a live block was overwritten (or could not be made)";
  try {
    heap.check();
    FAIL() << "check() should report the failed requests";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), r[2]) << e.what();
    EXPECT_NE(std::string(e.what()).find("9 device allocation(s) returned null"), std::string::npos)
        << e.what();
  }
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
}

TEST(device_heap, cuda_malloc_heap_serves_the_same_kernels) {
  nrt::heap_options options;
  options.kind = nrt::heap_kind::cuda_malloc;
  // CUDA's default 8 MiB: CUDA refuses to resize its malloc heap once a kernel that may call malloc
  // has run, and earlier tests' kernels (which contain the cuda_malloc branch) have.
  options.bytes = 8 * gpumem::MiB;
  nrt::device_heap heap(options);
  EXPECT_EQ(heap.kind(), nrt::heap_kind::cuda_malloc);
  EXPECT_NE(heap.name().find("cuda malloc heap"), std::string::npos);
  unsigned const n = 2048;
  device_array<void*> out(n);
  device_array<unsigned long long> counters(2);
  gpumem::launch({n / 128, 128}, allocate_each{heap.handle(), 100, n, out.data(), counters.data()});
  gpumem::launch({n / 128, 128}, free_each{heap.handle(), n, out.data(), counters.data() + 1, 100});
  std::vector<unsigned long long> const c = counters.to_host();
  EXPECT_EQ(c[0], n);
  EXPECT_EQ(c[1], 0u);
  EXPECT_NO_THROW(heap.check());
}

}  // namespace
