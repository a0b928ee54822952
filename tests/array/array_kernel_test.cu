// Kernels over gpumem arrays (through gpumem::launch, so the mapped and managed tests also run on
// the host backend), the shared-memory non-aliasing test and the event-timed bandwidth (GPU only).
#include "array_test_support.hpp"

#include <gpumem/array/event.hpp>
#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/mapped_array.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/shared_memory.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/launch.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gpumem {
namespace {

struct write_squares {
  array_view<int> out;
  GPUMEM_HD void operator()(thread_index const& t) const {
    auto const i = t.global();
    if (i < out.size()) out[i] = static_cast<int>(i * i);
  }
};

struct add_one_2d {
  array_view<double> a;
  GPUMEM_HD void operator()(thread_index const& t) const {
    auto const i = t.global();
    if (i < a.shape(0) * a.shape(1)) a(i / a.shape(1), i % a.shape(1)) += 1.0;
  }
};

TEST(array_kernel, kernel_writes_a_mapped_array_the_host_sees) {
  mapped_array<int> m({1000});
  std::memset(m.data(), 0, m.nbytes());
  auto s = stream::create();
  launch({8, 128, s.handle()}, write_squares{m.view()});
  s.synchronize();
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(m(i), i * i) << i;
}

TEST(array_kernel, managed_array_host_then_kernel_then_host) {
  managed_array<double> g({10, 7});
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t j = 0; j < 7; ++j)
      g(i, j) = static_cast<double>(i * 7 + j);
  auto s = stream::create();
  launch({1, 128, s.handle()}, add_one_2d{g.view()});
  s.synchronize();
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t j = 0; j < 7; ++j)
      ASSERT_EQ(g(i, j), static_cast<double>(i * 7 + j) + 1.0);
}

TEST(array_kernel, kernel_on_a_strided_device_view) {
  device_array<int> d({40});
  d.copy_to_device(std::vector<int>(40, -1));
  auto evens = d.slice({slice{0, 40, 2}});
  launch({1, 32}, write_squares{evens.view()});
  backend().synchronize();
  auto all = d.copy_to_host();
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(all[i], i % 2 == 0 ? (i / 2) * (i / 2) : -1) << i;
}

// One thread writes every float and every int piece, then reads the floats back. If the carver's
// pieces aliased, the int writes would overwrite the floats (the spec's 1078523331 effect).
// `naive` carves both pieces at offset 0, as two `extern __shared__` arrays would: the control
// that shows the test detects aliasing.
struct shared_alias_probe {
  array_view<int> result;  // [0]: mismatching floats, [1]: pieces fitted, [2]: distinct offsets
  std::size_t count;
  std::size_t bytes;
  bool naive;
  GPUMEM_HD void operator()(thread_index const&) const {
    shared_memory_carver c(dynamic_shared_memory(), bytes);
    array_view<float> f = c.take<float>(count);
    array_view<std::int32_t> n =
        naive ? shared_memory_carver(dynamic_shared_memory(), bytes).take<std::int32_t>(count)
              : c.take<std::int32_t>(count);
    result[1] = c.failed() || f.data() == nullptr ? 0 : 1;
    if (result[1] == 0) return;
    for (std::size_t k = 0; k < count; ++k)
      f[k] = 3.14f + static_cast<float>(k);
    for (std::size_t k = 0; k < count; ++k)
      n[k] = static_cast<std::int32_t>(k + 1);
    int bad = 0;
    for (std::size_t k = 0; k < count; ++k)
      if (f[k] != 3.14f + static_cast<float>(k)) ++bad;
    result[0] = bad;
    result[2] = static_cast<void*>(f.data()) != static_cast<void*>(n.data()) ? 1 : 0;
  }
};

TEST(array_kernel, shared_memory_views_do_not_alias) {
  if (!test::on_cuda_backend())
    GTEST_SKIP() << "needs the cuda backend: the host backend has no shared memory";
  for (std::size_t count : {std::size_t{1}, std::size_t{33}}) {
    shared_memory_carver plan;
    plan.take<float>(count);
    plan.take<std::int32_t>(count);
    for (bool naive : {false, true}) {
      mapped_array<int> result({3});
      result(0) = result(1) = result(2) = -1;
      auto s = stream::create();
      launch({1, 1, s.handle(), plan.bytes()},
             shared_alias_probe{result.view(), count, plan.bytes(), naive});
      s.synchronize();
      ASSERT_EQ(result(1), 1) << "the pieces did not fit in " << plan.bytes() << " bytes";
      if (naive) {
        EXPECT_EQ(result(2), 0);
        EXPECT_EQ(result(0), static_cast<int>(count)) << "control: aliased views must clash";
      } else {
        EXPECT_EQ(result(2), 1);
        EXPECT_EQ(result(0), 0) << "carved views alias (count " << count << ")";
      }
    }
  }
}

TEST(array_kernel, event_timing_gives_a_plausible_bandwidth) {
  if (!test::on_cuda_backend()) GTEST_SKIP() << "needs the cuda backend: host timings say nothing";
  std::size_t const n = std::size_t{64} << 20;  // 64 MiB
  pinned_array<unsigned char> src({n});
  std::memset(src.data(), 7, n);
  device_array<unsigned char> d({n});
  auto s = stream::create();
  copy(d, src, s);  // warm-up
  event start = event::create(), stop = event::create();
  start.record(s);
  copy(d, src, s);
  stop.record(s);
  stop.synchronize();
  float const ms = event_elapsed_time(start, stop);
  double const gb_per_s = static_cast<double>(n) / (ms * 1e-3) / 1e9;
  std::printf("host->device 64 MiB from pinned memory: %.3f ms, %.1f GB/s\n", ms, gb_per_s);
  EXPECT_GT(ms, 0.f);
  // PCIe 3 x16 to NVLink-C2C spans about 10..450 GB/s; allow a wide margin either way.
  EXPECT_GT(gb_per_s, 1.0);
  EXPECT_LT(gb_per_s, 2000.0);
}

}  // namespace
}  // namespace gpumem
