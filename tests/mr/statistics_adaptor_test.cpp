#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

// Hands out one fake address for any size and takes it back: counts without memory, so that
// counters can be driven to the top of their range.
class address_only_resource final : public memory_resource {
 public:
  std::string name() const override { return "address_only_resource"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override {
    return bytes == 0 ? nullptr : reinterpret_cast<void*>(std::uintptr_t{4096});
  }
  void do_deallocate(void*, std::size_t, stream_handle) noexcept override {}
};

// The total passes INT64_MAX after enough churn of large blocks: it saturates, and a size above
// INT64_MAX is counted as INT64_MAX, never as a negative amount.
TEST(statistics_adaptor, totals_saturate_and_huge_sizes_never_count_negative) {
  address_only_resource upstream;
  statistics_adaptor stats(upstream);
  constexpr std::int64_t top = std::numeric_limits<std::int64_t>::max();
  std::size_t const block = std::size_t{1} << 62;
  for (int i = 0; i < 3; ++i) {
    void* p = stats.allocate(block, nullptr);
    stats.deallocate(p, block, nullptr);
  }
  EXPECT_EQ(stats.bytes().total, top) << "3 x 2^62 bytes: the total must stop at INT64_MAX";
  EXPECT_EQ(stats.bytes().current, 0);
  stats.reset_peaks_and_totals();
  void* huge = stats.allocate(~std::size_t{0}, nullptr);
  EXPECT_EQ(stats.bytes().current, top);
  EXPECT_EQ(stats.bytes().total, top);
  stats.deallocate(huge, ~std::size_t{0}, nullptr);
  EXPECT_EQ(stats.bytes().current, 0);
}

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

// A free refused below (a double free the pool ignores) is not counted: current bytes and
// allocations stay those of the live blocks.
TEST(statistics_adaptor, a_free_refused_below_is_not_counted) {
  cuda_resource device;
  pool_resource pool(device);
  statistics_adaptor counted(pool);
  void* const a = counted.allocate(4 * MiB, nullptr);
  void* const b = counted.allocate(1000, nullptr);
  counted.deallocate(b, 1000, nullptr);
  counted.deallocate(b, 1000, nullptr);  // a double free of a cached size: the pool ignores it
  EXPECT_EQ(counted.bytes().current, static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(counted.allocations().current, 1);
  counted.deallocate(a, 4 * MiB, nullptr);
  counted.deallocate(a, 4 * MiB, nullptr);  // and of a large block
  EXPECT_EQ(counted.bytes().current, 0);
  EXPECT_EQ(counted.allocations().current, 0);
}

// A free the resource could not carry out (freed twice: the backend refuses it) is not counted
// either (cuda_resource reports it), and a count never goes below zero.
TEST(statistics_adaptor, a_free_the_upstream_could_not_carry_out_is_not_counted) {
  cuda_resource device;
  statistics_adaptor counted(device);
  void* const a = counted.allocate(32 * KiB, nullptr);
  void* const b = counted.allocate(16 * KiB, nullptr);
  counted.deallocate(b, 16 * KiB, nullptr);
  counted.deallocate(b, 16 * KiB, nullptr);
  EXPECT_EQ(counted.bytes().current, static_cast<std::int64_t>(32 * KiB));
  counted.deallocate(a, 32 * KiB, nullptr);
  EXPECT_EQ(counted.bytes().current, 0);
  EXPECT_EQ(counted.allocations().current, 0);
}

// A double free the pool misses at once (not among the last blocks of the thread's stack) and
// finds later, while a later legitimate free merges parked blocks, must not make that legitimate
// free look refused: the counts would keep a freed block for ever.
TEST(statistics_adaptor, a_double_free_found_later_does_not_refuse_another_free) {
  cuda_resource device;
  pool_options options;
  options.max_cached_size = 4 * MiB;  // blocks of 1 MiB are parked on the thread's stack
  pool_resource pool(device, options);
  statistics_adaptor counted(pool);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i)
    blocks.push_back(counted.allocate(1 * MiB, nullptr));
  std::size_t const y_bytes = 1 * MiB - 4 * KiB;
  void* const y = counted.allocate(y_bytes, nullptr);
  counted.deallocate(blocks[0], 1 * MiB, nullptr);
  counted.deallocate(y, y_bytes, nullptr);
  counted.deallocate(blocks[1], 1 * MiB, nullptr);
  counted.deallocate(y, y_bytes, nullptr);  // missed now, found when the parked blocks merge
  for (int i = 2; i < 16; ++i)
    counted.deallocate(blocks[i], 1 * MiB, nullptr);
  EXPECT_EQ(counted.bytes().current, 0) << "a legitimate free was taken for a refused one";
  EXPECT_EQ(counted.allocations().current, 0);
}

}  // namespace
}  // namespace gpumem
