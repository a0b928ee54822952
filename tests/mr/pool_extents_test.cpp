// pool_extent_set (src/mr/pool_extents.hpp, private to the pool, compiled into this test): the size
// bins, merging, refusals, and the best fit against a model (every extent in a std::map, the fit
// found by a walk over all of them), with the set's own index check after every step; and a node
// made ready (reserve_node) serving the next insert while the heap refuses (this executable
// replaces the global operator new).
#include "pool_extents.hpp"
#include "replaced_new.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <new>
#include <random>
#include <vector>

namespace {

std::atomic<bool> refuse_new{false};

}  // namespace

bool gpumem::test::refuse_allocation() noexcept {
  return refuse_new.load();
}

namespace gpumem::detail {
namespace {

// Runs `f` while every operator new throws std::bad_alloc.
template <class F>
void without_heap(F&& f) {
  refuse_new = true;
  try {
    f();
  } catch (...) {
    refuse_new = false;
    throw;
  }
  refuse_new = false;
}

constexpr std::size_t unit = 256;

void expect_sound(pool_extent_set const& set) {
  EXPECT_EQ(set.validate_index(), "");
}

TEST(pool_extent_set, bins_grow_with_size_and_hold_sizes_within_a_sixteenth) {
  unsigned last = 0;
  std::size_t bin_start = unit;
  for (std::size_t size = unit; size <= (std::size_t{1} << 40);
       size += size / 64 / unit * unit + unit) {
    unsigned const bin = pool_extent_set::bin_of(size);
    ASSERT_GE(bin, last) << size;
    if (bin != last) bin_start = size;
    // Every size in a bin is within 1/16 of the bin's first size (exact below 16 units).
    ASSERT_LE(size - bin_start, bin_start / 16) << size;
    last = bin;
  }
  EXPECT_LT(pool_extent_set::bin_of(~std::size_t{0}), 64u * 14u);
  EXPECT_EQ(pool_extent_set::bin_of(unit), 1u);
  EXPECT_NE(pool_extent_set::bin_of(unit), pool_extent_set::bin_of(2 * unit));
}

TEST(pool_extent_set, merges_neighbours_of_one_chunk_only_and_refuses_overlaps) {
  pool_chunk a{0x100000, 64 * unit};
  pool_chunk b{0x100000 + 64 * unit, 64 * unit};  // right after a
  pool_extent_set set;
  using r = pool_extent_set::insert_result;
  EXPECT_EQ(set.insert(a.base + 4 * unit, 4 * unit, 1, &a), r::inserted);
  EXPECT_EQ(set.insert(a.base + 12 * unit, 4 * unit, 2, &a), r::inserted);
  EXPECT_EQ(set.insert(a.base + 8 * unit, 4 * unit, 1, &a), r::inserted);  // joins both
  ASSERT_EQ(set.count(), 1u);
  EXPECT_EQ(set.extents().begin()->second.start, a.base + 4 * unit);
  EXPECT_EQ(set.extents().begin()->second.size, 12 * unit);
  EXPECT_EQ(set.extents().begin()->second.epoch, 2u);           // the later epoch
  EXPECT_EQ(set.insert(a.base, 4 * unit, 0, &a), r::inserted);  // joins the next alone
  EXPECT_EQ(set.extents().begin()->second.start, a.base);
  EXPECT_EQ(set.insert(a.base + 60 * unit, 4 * unit, 0, &a), r::inserted);
  EXPECT_EQ(set.insert(b.base, 4 * unit, 0, &b), r::inserted);  // adjacent, another chunk
  EXPECT_EQ(set.count(), 3u);
  EXPECT_EQ(set.insert(a.base + 2 * unit, 4 * unit, 0, &a), r::overlaps);
  EXPECT_EQ(set.insert(a.base + 62 * unit, 4 * unit, 0, &a), r::outside_chunk);
  EXPECT_EQ(set.insert(a.base, unit, 0, nullptr), r::outside_chunk);
  EXPECT_EQ(set.bytes(), 24 * unit);
  EXPECT_EQ(set.largest(), 16 * unit);
  expect_sound(set);
  // Carving from the start and cutting the back keep the bins right.
  auto const first = set.extents().begin();
  EXPECT_EQ(set.take(*first, 3 * unit), a.base);
  EXPECT_EQ(set.extents().begin()->second.start, a.base + 3 * unit);
  set.cut_back(set.extents().begin(), 5 * unit);
  EXPECT_EQ(set.extents().begin()->second.size, 8 * unit);
  EXPECT_EQ(set.bytes(), 16 * unit);
  expect_sound(set);
  while (!set.empty())
    set.erase(set.extents().begin());
  EXPECT_EQ(set.bytes(), 0u);
  EXPECT_EQ(set.largest(), 0u);
  expect_sound(set);
}

TEST(pool_extent_set, finds_extents_by_start_and_end_and_sees_overlaps) {
  pool_chunk c{0x200000, 64 * unit};
  pool_extent_set set;
  ASSERT_EQ(set.insert(c.base + 8 * unit, 8 * unit, 0, &c),
            pool_extent_set::insert_result::inserted);
  ASSERT_EQ(set.insert(c.base + 32 * unit, 8 * unit, 0, &c),
            pool_extent_set::insert_result::inserted);
  auto const none = set.extents().end();
  EXPECT_TRUE(set.find_start(c.base + 8 * unit) != none);
  EXPECT_TRUE(set.find_start(c.base + 9 * unit) == none);
  EXPECT_TRUE(set.find_end(c.base + 16 * unit) != none);
  EXPECT_TRUE(set.find_end(c.base + 15 * unit) == none);
  EXPECT_TRUE(set.overlaps(c.base + 15 * unit, unit));
  EXPECT_TRUE(set.overlaps(c.base, 9 * unit));
  EXPECT_TRUE(set.overlaps(c.base + 20 * unit, 13 * unit));
  EXPECT_FALSE(set.overlaps(c.base + 16 * unit, 16 * unit));
  EXPECT_FALSE(set.overlaps(c.base, 8 * unit));
  // Cutting the back moves the key to the new end; carving the start keeps it.
  set.cut_back(set.find_start(c.base + 32 * unit), 2 * unit);
  EXPECT_TRUE(set.find_end(c.base + 38 * unit) != none);
  EXPECT_TRUE(set.find_end(c.base + 40 * unit) == none);
  EXPECT_EQ(set.take(*set.find_start(c.base + 8 * unit), 2 * unit), c.base + 8 * unit);
  EXPECT_TRUE(set.find_start(c.base + 10 * unit) != none);
  EXPECT_TRUE(set.find_end(c.base + 16 * unit) != none);
  // Joining the extent before (its end moves) and both at once.
  ASSERT_EQ(set.insert(c.base + 16 * unit, 4 * unit, 0, &c),
            pool_extent_set::insert_result::inserted);
  EXPECT_TRUE(set.find_end(c.base + 20 * unit) != none);
  ASSERT_EQ(set.insert(c.base + 20 * unit, 12 * unit, 0, &c),
            pool_extent_set::insert_result::inserted);
  ASSERT_EQ(set.count(), 1u);
  EXPECT_EQ(set.extents().begin()->second.start, c.base + 10 * unit);
  EXPECT_EQ(set.extents().begin()->first, c.base + 38 * unit);
  EXPECT_EQ(set.bytes(), 28 * unit);
  expect_sound(set);
}

TEST(pool_extent_set, cut_out_keeps_what_is_left_on_either_side) {
  pool_chunk c{0x300000, 64 * unit};
  pool_extent_set set;
  ASSERT_EQ(set.insert(c.base + 8 * unit, 32 * unit, 3, &c),
            pool_extent_set::insert_result::inserted);
  auto const none = set.extents().end();
  // From the middle: two extents with the epoch and chunk of the one cut.
  set.cut_out(set.find_start(c.base + 8 * unit), c.base + 12 * unit, 8 * unit);
  ASSERT_EQ(set.count(), 2u);
  EXPECT_TRUE(set.find_end(c.base + 12 * unit) != none);
  auto const after = set.find_start(c.base + 20 * unit);
  ASSERT_TRUE(after != none);
  EXPECT_EQ(after->first, c.base + 40 * unit);
  EXPECT_EQ(after->second.epoch, 3u);
  EXPECT_EQ(set.find_start(c.base + 8 * unit)->second.epoch, 3u);
  EXPECT_EQ(set.find_start(c.base + 8 * unit)->second.chunk, &c);
  EXPECT_EQ(set.bytes(), 24 * unit);
  expect_sound(set);
  // At either end: one extent left, no new node needed.
  set.cut_out(after, c.base + 20 * unit, 4 * unit);
  EXPECT_TRUE(set.find_start(c.base + 24 * unit) != none);
  set.cut_out(set.find_start(c.base + 24 * unit), c.base + 36 * unit, 4 * unit);
  EXPECT_TRUE(set.find_end(c.base + 36 * unit) != none);
  EXPECT_EQ(set.bytes(), 16 * unit);
  EXPECT_EQ(set.largest(), 12 * unit);
  expect_sound(set);
  // All of it.
  set.cut_out(set.find_start(c.base + 24 * unit), c.base + 24 * unit, 12 * unit);
  EXPECT_EQ(set.count(), 1u);
  EXPECT_EQ(set.bytes(), 4 * unit);
  expect_sound(set);
}

// The model: the smallest extent that fits, the lowest address among equals.
std::uintptr_t model_fit(std::map<std::uintptr_t, std::size_t> const& model, std::size_t size) {
  std::uintptr_t best = 0;
  std::size_t best_size = 0;
  for (auto const& [addr, s] : model)
    if (s >= size && (best == 0 || s < best_size)) {
      best = addr;
      best_size = s;
    }
  return best;
}

TEST(pool_extent_set, best_fit_is_the_smallest_fit_against_a_model) {
  std::mt19937_64 rng(7);
  pool_chunk chunk{std::uintptr_t{1} << 32, std::size_t{1} << 30};
  std::size_t const slots = chunk.size / unit;
  for (int round = 0; round < 20; ++round) {
    pool_extent_set set;
    // Few extents (at most scan_limit in all), so that the fit must be exact.
    std::map<std::uintptr_t, std::size_t> model;
    for (int step = 0; step < 400; ++step) {
      std::size_t const size = (1 + rng() % (round < 10 ? 64 : 40000)) * unit;
      if (rng() % 3 != 0 && model.size() < pool_extent_set::scan_limit) {
        std::uintptr_t const addr = chunk.base + (rng() % (slots - size / unit)) * unit;
        auto next = model.lower_bound(addr);
        bool const clear =
            (next == model.end() || next->first >= addr + size) &&
            (next == model.begin() || std::prev(next)->first + std::prev(next)->second <= addr);
        auto const result = set.insert(addr, size, 0, &chunk);
        ASSERT_EQ(result == pool_extent_set::insert_result::inserted, clear);
        if (clear) {  // the model merges as the set does
          std::uintptr_t start = addr;
          std::size_t total = size;
          next = model.lower_bound(addr);
          if (next != model.begin() && std::prev(next)->first + std::prev(next)->second == addr) {
            start = std::prev(next)->first;
            total += std::prev(next)->second;
            model.erase(std::prev(next));
          }
          next = model.lower_bound(addr);
          if (next != model.end() && next->first == addr + size) {
            total += next->second;
            model.erase(next);
          }
          model[start] = total;
        }
      } else {
        std::uintptr_t const expected = model_fit(model, size);
        pool_extent_entry* const fit = set.best_fit(size);
        if (expected == 0) {
          ASSERT_EQ(fit, nullptr);
          continue;
        }
        ASSERT_NE(fit, nullptr);
        ASSERT_EQ(fit->second.start, expected) << size;
        std::size_t const take = rng() % 2 ? size : fit->second.size;
        std::size_t const had = model[expected];
        ASSERT_EQ(set.take(*fit, take), expected);
        model.erase(expected);
        if (had > take) model[expected + take] = had - take;
      }
      ASSERT_EQ(set.count(), model.size());
      ASSERT_EQ(set.validate_index(), "");
    }
  }
}

TEST(pool_extent_set, a_long_bin_still_yields_its_only_fit) {
  // Many extents of one bin, all one unit too small, and the one that fits the oldest (last in its
  // bin's list, past the scan limit): with no larger bin in use, the fit must still be found.
  pool_chunk chunk{std::uintptr_t{1} << 32, std::size_t{1} << 30};
  pool_extent_set set;
  std::size_t const fits = 1040 * unit;  // bin of 1024..1087 units
  ASSERT_EQ(pool_extent_set::bin_of(fits), pool_extent_set::bin_of(1039 * unit));
  ASSERT_EQ(set.insert(chunk.base, fits, 0, &chunk), pool_extent_set::insert_result::inserted);
  for (std::size_t i = 1; i <= 3 * pool_extent_set::scan_limit; ++i)
    ASSERT_EQ(set.insert(chunk.base + i * 2048 * unit, 1039 * unit, 0, &chunk),
              pool_extent_set::insert_result::inserted);
  pool_extent_entry* const fit = set.best_fit(fits);
  ASSERT_NE(fit, nullptr);
  EXPECT_EQ(fit->second.start, chunk.base);
  // A fit in a larger bin is taken when the request's bin is long and holds none.
  EXPECT_EQ(set.take(*fit, fits), chunk.base);
  ASSERT_EQ(set.insert(chunk.base + 200 * 2048 * unit, 4096 * unit, 0, &chunk),
            pool_extent_set::insert_result::inserted);
  pool_extent_entry* const larger = set.best_fit(1040 * unit);
  ASSERT_NE(larger, nullptr);
  EXPECT_EQ(larger->second.size, 4096 * unit);
  EXPECT_EQ(set.best_fit(4097 * unit), nullptr);
  expect_sound(set);
}

TEST(pool_extent_set, a_reserved_node_serves_the_next_insert_without_the_heap) {
  if (!GPUMEM_TEST_OWN_NEW) GTEST_SKIP() << "a sanitizer runtime owns operator new in this build";
  pool_chunk chunk{0x100000, 64 * unit};
  pool_extent_set set;
  using r = pool_extent_set::insert_result;
  ASSERT_EQ(set.insert(chunk.base, unit, 0, &chunk), r::inserted);
  set.reserve_node();
  set.reserve_node();  // already ready: nothing more
  r apart = r::overlaps;
  without_heap([&] { apart = set.insert(chunk.base + 4 * unit, unit, 0, &chunk); });
  EXPECT_EQ(apart, r::inserted);  // joins no neighbour: took the ready node
  // The next one needs a node from the heap: refused, and nothing changed.
  bool refused = false;
  without_heap([&] {
    try {
      set.insert(chunk.base + 8 * unit, unit, 0, &chunk);
    } catch (std::bad_alloc const&) {
      refused = true;
    }
  });
  EXPECT_TRUE(refused);
  EXPECT_EQ(set.count(), 2u);
  EXPECT_EQ(set.bytes(), 2 * unit);
  expect_sound(set);
  // A cut out of the middle of an extent needs a node too.
  ASSERT_EQ(set.insert(chunk.base + 16 * unit, 8 * unit, 0, &chunk), r::inserted);
  set.reserve_node();
  without_heap(
      [&] { set.cut_out(set.find_start(chunk.base + 16 * unit), chunk.base + 18 * unit, unit); });
  EXPECT_EQ(set.count(), 4u);
  EXPECT_EQ(set.bytes(), 9 * unit);
  expect_sound(set);
}

}  // namespace
}  // namespace gpumem::detail
