// The typed contract suite, part two: sizes that cannot be served (their rounding or a header
// would wrap past SIZE_MAX) and sizes just past every rounding boundary, on every fixture of
// resource_contract_fixtures.hpp, on both backends.
#include "resource_contract_fixtures.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

// (AddressSanitizer may return null for the impossible sizes: resource_contract_test.cpp sets
// allocator_may_return_null for this executable.)

namespace gpumem {
namespace {

using namespace contract;

// Sizes whose rounding (to 256 bytes, 4 KiB pages, 2 MiB chunks, a size class) or header would
// wrap past SIZE_MAX to a small size, and those just past 2^62 and 2^63: none can be served, and
// each must be gpumem::out_of_memory naming exactly that size, never a small block.
std::vector<std::size_t> sizes_that_wrap() {
  constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
  constexpr std::size_t half = std::size_t{1} << 63;
  return {top,
          top - 1,
          top - 7,
          top - 255,
          top - 256,
          top - 4095,
          top - 4096,
          top - (2 * MiB - 1),
          top - 2 * MiB,
          half,
          half + 1,
          max_allocation_bytes,
          (std::size_t{1} << 62) + 1};
}

// Sizes just past the roundings that CAN be served: the pool's 256-byte steps and class
// boundaries, its cached limit (pool_options{}.max_cached_size, what the pool fixtures use), the
// 2 MiB growth granularity and its 32 MiB chunk.
std::vector<std::size_t> sizes_past_boundaries() {
  std::size_t const cached_limit = pool_options{}.max_cached_size;
  return {255,
          256,
          257,
          2048,
          2049,
          2304 + 1,
          cached_limit - 1,
          cached_limit,
          cached_limit + 1,
          2 * MiB + 1,
          8 * MiB + 1,
          32 * MiB + 1};
}

template <class Fixture>
class resource_sizes : public resource_contract<Fixture> {};

TYPED_TEST_SUITE(resource_sizes, contract_fixtures, fixture_names);

TYPED_TEST(resource_sizes, sizes_that_would_wrap_are_out_of_memory_and_touch_no_live_block) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  constexpr std::size_t live_bytes = 64 * KiB;
  void* live = mr.allocate(live_bytes, stream);
  ASSERT_NE(live, nullptr);
  fill_block(mr, live, live_bytes, 0x3C, stream);
  for (std::size_t const bytes : sizes_that_wrap()) {
    try {
      void* p = mr.allocate(bytes, stream);
      // Not freed: a resource that served this size has already broken its bookkeeping.
      ADD_FAILURE() << mr.name() << " allocated " << bytes << " bytes at " << p;
    } catch (out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), bytes) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(first_mismatch(mr, live, live_bytes, 0x3C, stream), live_bytes)
      << "a refused request overwrote a live block";
  // Still usable, and a new block does not overlap the live one.
  void* next = mr.allocate(live_bytes, stream);
  ASSERT_NE(next, nullptr);
  EXPECT_FALSE(test::overlap(live, live_bytes, next, live_bytes)) << "blocks overlap";
  mr.deallocate(next, live_bytes, stream);
  mr.deallocate(live, live_bytes, stream);
  backend().synchronize_stream(stream);
}

TYPED_TEST(resource_sizes, sizes_just_past_rounding_boundaries_are_distinct_whole_blocks) {
  memory_resource& mr = this->mr();
  scoped_stream stream(this->forget());
  std::vector<std::size_t> const sizes = sizes_past_boundaries();
  std::vector<patterned_block> blocks;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    blocks.push_back(allocate_patterned(mr, sizes[i], static_cast<std::uint8_t>(i + 1), stream));
    ASSERT_NE(blocks.back().p, nullptr) << sizes[i];
  }
  ASSERT_NO_FATAL_FAILURE(expect_distinct_and_intact(mr, blocks, stream));
  for (patterned_block const& b : blocks)
    mr.deallocate(b.p, b.bytes, stream);
  backend().synchronize_stream(stream);
}

}  // namespace
}  // namespace gpumem
