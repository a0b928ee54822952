// The device heap running out: exhaustion returns null and reports out_of_memory, and nothing is
// lost; a late reservation on an emptied or installing slot word hands out nothing (the slot
// states are ranges that absorb late additions); threads racing to exhaustion never get a block
// twice.
#include "device_heap_test_support.hpp"
#include "nrt_support.hpp"

#include <gpumem/core/atomic.hpp>
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

TEST(device_heap, exhaustion_returns_null_reports_and_loses_nothing) {
  std::size_t const block = 1024;
  nrt::heap_options options;
  options.bytes = 4 * gpumem::MiB;
  options.slab_bytes = 64 * gpumem::KiB;
  options.shards = 1;
  nrt::device_heap heap(options);
  std::size_t const slabs = heap.capacity() / heap.slab_bytes();
  std::size_t const per_slab = heap.slab_bytes() / block;
  unsigned const n = static_cast<unsigned>(heap.capacity() / block + 1000);
  device_array<void*> out(n);
  device_array<unsigned long long> counters(2);
  for (int round = 0; round < 2; ++round) {
    gpumem::backend().fill(counters.data(), 0, 2 * sizeof(unsigned long long));
    gpumem::launch({(n + 127) / 128, 128},
                   allocate_each{heap.handle(), block, n, out.data(), counters.data()});
    std::size_t const got = counters.to_host()[0];
    EXPECT_LE(got, slabs * per_slab) << "round " << round;
    EXPECT_GE(got, (slabs - 1) * per_slab) << "round " << round << ": capacity lost";
    try {
      heap.check();
      FAIL() << "check() should throw out_of_memory";
    } catch (gpumem::out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), block);
      EXPECT_NE(std::string(e.what()).find("gpumem device heap"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(n - got) + " device allocation"),
                std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(heap.check()) << "check() clears what it reported";
    gpumem::launch({(n + 127) / 128, 128},
                   free_each{heap.handle(), n, out.data(), counters.data() + 1, block});
    EXPECT_EQ(counters.to_host()[1], 0u) << "blocks were corrupted";
    heap.trim();
    EXPECT_EQ(heap.usage().used_bytes, 0u) << "round " << round << ": slabs lost";
  }
  // The whole capacity is one free run again: a single block of all of it fits.
  unsigned long long* whole_ok = counters.data();
  gpumem::backend().fill(whole_ok, 0, sizeof(unsigned long long));
  gpumem::launch({1, 1}, allocate_each{heap.handle(), heap.capacity(), 1, out.data(), whole_ok});
  EXPECT_EQ(counters.to_host()[0], 1u);
  EXPECT_EQ(heap.usage().used_bytes, heap.capacity());
  gpumem::launch({1, 1}, free_each{heap.handle(), 1, out.data(), counters.data() + 1, 64});
  EXPECT_EQ(heap.usage().used_bytes, 0u);
  EXPECT_NO_THROW(heap.check());
}

// A leader reads its slot word and then adds to it (reserve_blocks: one load, one fetch_add, no
// CAS), so a leader delayed between the two adds to whatever the word holds by then: possibly a
// slot that was emptied because the heap ran out. This kernel plays that interleaving in one
// thread: it exhausts the heap, adds to the emptied slot as late leaders of 1 and 32 lanes would,
// and asks again after each. A late addition must not make the slot name a slab (when the empty
// state was ~0, adding 1 made it name slab 0, whose blocks were then handed out a second time).
struct late_leader_kernel {
  nrt::heap_ref heap;
  std::size_t block;
  void** blocks;            // [capacity / block]
  unsigned long long* out;  // [0] blocks taken, [1] a late addition made the slot name a slab,
                            // [2] blocks handed out after a late addition
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    std::size_t const max_blocks = (std::size_t{heap.slab_count} << heap.slab_shift) / block;
    std::size_t taken = 0;
    while (taken < max_blocks) {
      void* const p = nrt::detail::heap_allocate(heap, block);
      if (p == nullptr) break;
      blocks[taken++] = p;
    }
    out[0] = taken;
    unsigned long long* const slot = &heap.slots[nrt::detail::size_class(block) * heap.shard_count +
                                                 nrt::detail::shard_of(heap)];
    unsigned long long const late_lanes[] = {1, 32, 1};
    for (unsigned long long const lanes : late_lanes) {
      gpumem::atomic_fetch_add(slot, lanes, gpumem::mem_order::acq_rel);
      // Not asking again once the slot names a slab: with no group to retire it, that would spin.
      if ((gpumem::atomic_load(slot) >> 32) != nrt::detail::no_slab) {
        out[1] = 1;
        break;
      }
      void* const p = nrt::detail::heap_allocate(heap, block);
      if (p != nullptr) {
        out[2] += 1;
        nrt::detail::heap_deallocate(heap, p);
      }
    }
    for (std::size_t i = 0; i < taken; ++i)
      nrt::detail::heap_deallocate(heap, blocks[i]);
  }
};

TEST(device_heap, a_late_leader_adding_to_an_emptied_slot_hands_out_nothing) {
  nrt::heap_options options;
  options.bytes = 1 * gpumem::MiB;
  options.slab_bytes = 64 * gpumem::KiB;
  options.shards = 1;
  nrt::device_heap heap(options);
  std::size_t const block = 16 * gpumem::KiB;
  std::size_t const capacity_blocks = heap.capacity() / block;
  device_array<void*> blocks(capacity_blocks);
  device_array<unsigned long long> out(3);
  gpumem::launch({1, 1}, late_leader_kernel{heap.handle(), block, blocks.data(), out.data()});
  std::vector<unsigned long long> const r = out.to_host();
  EXPECT_EQ(r[0], capacity_blocks) << "the empty heap did not give every block";
  EXPECT_EQ(r[1], 0u) << "a late addition to the emptied slot made it name a slab";
  EXPECT_EQ(r[2], 0u) << "a block was handed out after exhaustion";
  EXPECT_THROW(heap.check(), gpumem::out_of_memory);
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs lost";
}

// The no-slab states of a slot word absorb the additions of late leaders (any number of them, of
// up to 32 lanes each, as long as fewer than 2^30 lanes pile up): the word still names no slab and
// stays in its state.
TEST(device_heap, slot_states_absorb_late_additions) {
  using nrt::detail::slot_empty;
  using nrt::detail::slot_installing;
  for (unsigned long long const late : {0ull, 1ull, 32ull, 1ull << 20, (1ull << 30) - 1}) {
    SCOPED_TRACE(late);
    EXPECT_FALSE(nrt::detail::slot_holds_slab(slot_empty + late));
    EXPECT_FALSE(nrt::detail::slot_holds_slab(slot_installing + late));
    EXPECT_FALSE(nrt::detail::slot_is_installing(slot_empty + late));
    EXPECT_TRUE(nrt::detail::slot_is_installing(slot_installing + late));
  }
  EXPECT_TRUE(nrt::detail::slot_holds_slab(nrt::detail::slot_word(0, 0)));
  EXPECT_TRUE(nrt::detail::slot_holds_slab(nrt::detail::slot_word(nrt::detail::no_slab - 1, 9)));
}

// Threads run into the exhaustion of one slot together, round after round: the group that retires
// the last slab empties the slot while other leaders may sit between reading the slot and adding
// to it. A block handed out twice shows as a corrupted pattern, a revived slab as more blocks than
// the heap holds. (A late addition is a narrow window on 2 host workers: the kernel above is the
// deterministic check; this one catches it on the device and on hosts with many cores.)
TEST(device_heap, racing_to_exhaustion_never_hands_a_block_out_twice) {
  std::size_t const block = 1024;
  nrt::heap_options options;
  options.bytes = 17 * 64 * gpumem::KiB;  // 16 slabs after the metadata
  options.slab_bytes = 64 * gpumem::KiB;
  options.shards = 1;
  nrt::device_heap heap(options);
  std::size_t const capacity_blocks = heap.capacity() / block;
  auto const n = static_cast<unsigned>(4 * capacity_blocks);  // most of the grid meets exhaustion
  device_array<void*> out(n);
  device_array<unsigned long long> counters(2);
  for (unsigned round = 0; round < 300; ++round) {
    gpumem::backend().fill(counters.data(), 0, 2 * sizeof(unsigned long long));
    gpumem::launch({(n + 127) / 128, 128},
                   allocate_each{heap.handle(), block, n, out.data(), counters.data()});
    gpumem::launch({(n + 127) / 128, 128},
                   free_each{heap.handle(), n, out.data(), counters.data() + 1, block});
    std::vector<unsigned long long> const c = counters.to_host();
    ASSERT_LE(c[0], capacity_blocks) << "round " << round << ": more blocks than the heap holds";
    ASSERT_EQ(c[1], 0u) << "round " << round << ": blocks handed out twice";
    ASSERT_THROW(heap.check(), gpumem::out_of_memory) << "round " << round;
    heap.trim();
    ASSERT_EQ(heap.usage().used_bytes, 0u) << "round " << round << ": slabs lost";
  }
}

}  // namespace
