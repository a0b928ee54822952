// Host-side API of the device runtime: options validation, the statistics switch, the atomic and
// warp helpers' host behaviour.
#include "nrt_support.hpp"

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/warp.hpp>
#include <gpumem/nrt/device_heap.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace nrt = gpumem::nrt;

namespace {

TEST(nrt_options, a_slab_size_that_is_not_a_power_of_two_is_rejected_by_value) {
  nrt::heap_options options;
  options.bytes = 4 * gpumem::MiB;
  options.slab_bytes = 100000;
  try {
    nrt::device_heap heap(options);
    FAIL() << "expected logic_error";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("100000"), std::string::npos) << e.what();
  }
}

TEST(nrt_options, a_heap_too_small_for_one_slab_is_rejected) {
  nrt::heap_options options;
  options.bytes = 64 * gpumem::KiB;  // the metadata leaves less than one 64 KiB slab
  options.slab_bytes = 64 * gpumem::KiB;
  EXPECT_THROW(nrt::device_heap heap(options), gpumem::logic_error);
}

TEST(nrt_options, the_size_comes_from_the_environment_by_default) {
  nrt::device_heap heap;
  std::size_t const wanted = gpumem::environment_snapshot().device_heap_size;
  EXPECT_LE(heap.capacity(), wanted);
  EXPECT_GE(heap.capacity(), wanted - wanted / 16) << "metadata should be a small fraction";
  EXPECT_GE(heap.shards(), 1u);
  EXPECT_EQ(heap.usage().used_bytes, 0u);
}

TEST(nrt_memsys, statistics_off_by_default_and_reading_them_then_is_an_error) {
  nrt::memsys ms(nrt::heap_options{4 * gpumem::MiB});
  EXPECT_FALSE(ms.statistics_enabled());
  EXPECT_THROW(ms.statistics(), gpumem::logic_error);
  ms.enable_statistics();
  nrt::memsys_statistics const s = ms.statistics();
  EXPECT_TRUE(s.balanced());
  EXPECT_EQ(s.alloc, 0u);
  EXPECT_NO_THROW(ms.check());
}

TEST(nrt_memsys, ids_are_never_reused) {
  std::uint64_t first = 0;
  {
    nrt::memsys a(nrt::heap_options{4 * gpumem::MiB});
    first = a.id();
  }
  nrt::memsys b(nrt::heap_options{4 * gpumem::MiB});
  EXPECT_NE(b.id(), first);
}

TEST(core_atomic, operations_are_atomic_across_host_threads) {
  unsigned long long counter = 0;
  unsigned long long bits = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i)
        gpumem::atomic_fetch_add(&counter, 1ull, gpumem::mem_order::relaxed);
      gpumem::atomic_fetch_or(&bits, 1ull << t);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(gpumem::atomic_load(&counter), 40000u);
  EXPECT_EQ(bits, 0xFu);
  unsigned long long expected = 7;
  EXPECT_FALSE(gpumem::atomic_compare_exchange(&counter, expected, 1ull));
  EXPECT_EQ(expected, 40000u);
  EXPECT_EQ(gpumem::atomic_fetch_max(&counter, 50000ull), 40000u);
  EXPECT_EQ(counter, 50000u);
  EXPECT_EQ(gpumem::atomic_fetch_max(&counter, 3ull), 50000u);
  EXPECT_EQ(counter, 50000u);
}

TEST(cuda_warp, the_host_warp_has_one_lane) {
  EXPECT_EQ(gpumem::warp::lane_id(), 0u);
  EXPECT_EQ(gpumem::warp::active_mask(), 1u);
  EXPECT_EQ(gpumem::warp::ballot(1u, true), 1u);
  EXPECT_EQ(gpumem::warp::ballot(1u, false), 0u);
  EXPECT_EQ(gpumem::warp::match_any(1u, 42), 1u);
  EXPECT_EQ(gpumem::warp::shuffle(1u, 3.5, 0), 3.5);
  EXPECT_EQ(gpumem::warp::lowest_lane(0b1000u), 3u);
  EXPECT_EQ(gpumem::warp::popcount(0b1011u), 3);
}

}  // namespace
