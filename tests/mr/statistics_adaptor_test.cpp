#include <gpumem/core/error.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpumem {
namespace {

TEST(statistics_adaptor, counts_are_exact) {
  cuda_resource upstream;
  statistics_adaptor stats(upstream);
  void* a = stats.allocate(100, nullptr);
  void* b = stats.allocate(200, nullptr);
  void* c = stats.allocate(300, nullptr);
  EXPECT_EQ(stats.bytes().current, 600);
  EXPECT_EQ(stats.bytes().peak, 600);
  EXPECT_EQ(stats.bytes().total, 600);
  EXPECT_EQ(stats.allocations().current, 3);

  stats.deallocate(b, 200, nullptr);
  EXPECT_EQ(stats.bytes().current, 400);
  EXPECT_EQ(stats.bytes().peak, 600);
  EXPECT_EQ(stats.allocations().current, 2);
  EXPECT_EQ(stats.allocations().peak, 3);

  void* d = stats.allocate(50, nullptr);
  EXPECT_EQ(stats.bytes().current, 450);
  EXPECT_EQ(stats.bytes().peak, 600);
  EXPECT_EQ(stats.bytes().total, 650);
  EXPECT_EQ(stats.allocations().total, 4);

  stats.reset_peaks_and_totals();
  EXPECT_EQ(stats.bytes().peak, 450);
  EXPECT_EQ(stats.bytes().total, 0);
  EXPECT_EQ(stats.allocations().peak, 3);

  for (auto [p, n] : {std::pair{a, 100}, std::pair{c, 300}, std::pair{d, 50}})
    stats.deallocate(p, n, nullptr);
  EXPECT_EQ(stats.bytes().current, 0);
  EXPECT_EQ(stats.allocations().current, 0);
}

TEST(statistics_adaptor, failed_and_zero_byte_allocations_count_nothing) {
  cuda_resource device;
  limit_adaptor limited(device, 1024);
  statistics_adaptor stats(limited);
  EXPECT_EQ(stats.allocate(0, nullptr), nullptr);
  EXPECT_THROW(stats.allocate(2048, nullptr), out_of_memory);
  EXPECT_EQ(stats.bytes().total, 0);
  EXPECT_EQ(stats.allocations().total, 0);
  EXPECT_EQ(stats.allocations().current, 0);
}

TEST(statistics_adaptor, concurrent_counts_balance) {
  cuda_resource upstream;
  statistics_adaptor stats(upstream);
  constexpr int threads = 4, rounds = 200;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&stats, t] {
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes = 64 + static_cast<std::size_t>(t);
        void* p = stats.allocate(bytes, nullptr);
        stats.deallocate(p, bytes, nullptr);
      }
    });
  }
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(stats.bytes().current, 0);
  EXPECT_EQ(stats.allocations().current, 0);
  EXPECT_EQ(stats.allocations().total, threads * rounds);
  EXPECT_EQ(stats.bytes().total, rounds * (64 + 65 + 66 + 67));
  EXPECT_GE(stats.allocations().peak, 1);
  EXPECT_LE(stats.allocations().peak, threads);
}

TEST(statistics_adaptor, forwards_properties_and_name) {
  cuda_resource upstream;
  statistics_adaptor stats(upstream);
  EXPECT_EQ(stats.properties(), upstream.properties());
  EXPECT_EQ(stats.name(), "statistics_adaptor over cuda_resource");
  EXPECT_FALSE(stats == upstream);
}

}  // namespace
}  // namespace gpumem
