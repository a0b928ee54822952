// Bad frees on the device heap, on both backends: a pointer outside the heap, inside a block, into
// a slab no block came from, and blocks freed twice (one thread, and many threads at once). Each is
// recorded for device_heap::check() (logic_error) and changes nothing else: a slab's live blocks
// keep it.
#include "device_heap_test_support.hpp"
#include "expect_error.hpp"
#include "nrt_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

using gpumem::test::device_array;
using gpumem::test::expect_logic_error;
namespace nrt = gpumem::nrt;

namespace {

using namespace gpumem::test::heap;

// One thread frees `p`.
struct free_pointer {
  nrt::heap_ref heap;
  void* p;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    nrt::detail::heap_deallocate(heap, p);
  }
};

TEST(device_heap, freeing_a_pointer_outside_the_heap_is_reported) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  device_array<unsigned> foreign(16);
  gpumem::launch({1, 1}, free_pointer{heap.handle(), foreign.data()});
  try {
    heap.check();
    FAIL() << "check() should report the invalid free";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("outside it"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(heap.check());
}

// A large block freed twice, and pointers inside a large block: each free is reported and
// ignored; the run is released once.
struct bad_large_frees {
  nrt::heap_ref heap;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    void* const a = nrt::detail::heap_allocate(heap, 512 * 1024);
    nrt::detail::heap_deallocate(heap, a);
    nrt::detail::heap_deallocate(heap, a);  // twice, before the slabs are taken again
    void* const b = nrt::detail::heap_allocate(heap, 512 * 1024);
    char* const inside = static_cast<char*>(b);
    nrt::detail::heap_deallocate(heap, inside + 16);  // its first slab
    nrt::detail::heap_deallocate(heap, inside + (std::size_t{1} << heap.slab_shift));  // its second
    void* const c = nrt::detail::heap_allocate(heap, 512 * 1024);
    out[0] = a;
    out[1] = b;
    out[2] = c;
    nrt::detail::heap_deallocate(heap, b);
    nrt::detail::heap_deallocate(heap, c);
  }
};

TEST(device_heap, a_large_block_freed_twice_or_by_an_inner_pointer_is_reported) {
  nrt::device_heap heap(nrt::heap_options{4 * gpumem::MiB});
  device_array<void*> out(3);
  gpumem::launch({1, 1}, bad_large_frees{heap.handle(), out.data()});
  std::vector<void*> const blocks = out.to_host();
  ASSERT_NE(blocks[1], nullptr);
  ASSERT_NE(blocks[2], nullptr);
  EXPECT_NE(blocks[1], blocks[2]) << "b was still live when c was allocated";
  try {
    heap.check();
    FAIL() << "check() should report the invalid frees";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("3 free(s) of pointers that are no block"),
              std::string::npos)
        << e.what();
  }
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "the run was released more than once, or leaked";
}

// One slab of 4 KiB blocks (32 of them), all handed out, so the slot retires it: its count is then
// only its live blocks. Block 0 is freed twice and blocks 1..30 once; block 31 stays live.
constexpr std::size_t twice_block = 4096;
constexpr unsigned twice_blocks = 32;

struct free_one_block_twice {
  nrt::heap_ref heap;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    for (unsigned i = 0; i < twice_blocks; ++i)
      out[i] = nrt::detail::heap_allocate(heap, twice_block);
    nrt::detail::heap_deallocate(heap, out[0]);
    nrt::detail::heap_deallocate(heap, out[0]);  // the second free
    for (unsigned i = 1; i + 1 < twice_blocks; ++i)
      nrt::detail::heap_deallocate(heap, out[i]);
    fill_block(static_cast<unsigned char*>(out[twice_blocks - 1]), twice_block, 7);
  }
};

struct free_last_block {
  nrt::heap_ref heap;
  void** out;
  unsigned long long* intact;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    auto* const last = static_cast<unsigned char*>(out[twice_blocks - 1]);
    *intact = block_holds(last, twice_block, 7) ? 1 : 0;
    nrt::detail::heap_deallocate(heap, last);
  }
};

TEST(device_heap, a_small_block_freed_twice_is_reported_and_its_slab_stays_held) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  std::size_t const slab = heap.slab_bytes();
  ASSERT_EQ(slab / twice_block, twice_blocks) << "the test fills exactly one slab";
  device_array<void*> out(twice_blocks);
  gpumem::launch({1, 1}, free_one_block_twice{heap.handle(), out.data()});
  std::vector<void*> const blocks = out.to_host();
  for (void* p : blocks)
    ASSERT_NE(p, nullptr);
  expect_logic_error([&] { heap.check(); }, "1 free(s) of pointers that are no block of the heap");
  // The full slab (block 31 lives in it) and the slot's fresh one. Had the second free counted,
  // the full slab would have gone back to the bitmap under its live block.
  EXPECT_EQ(heap.usage().used_bytes, 2 * slab);
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, slab) << "the live block's slab must stay held";
  device_array<unsigned long long> intact(1);
  gpumem::launch({1, 1}, free_last_block{heap.handle(), out.data(), intact.data()});
  EXPECT_EQ(intact.to_host()[0], 1u) << "the live block was overwritten";
  EXPECT_NO_THROW(heap.check());
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "slabs leaked";
}

// One thread allocates `count` blocks of `bytes` into out[0..count).
struct allocate_blocks {
  nrt::heap_ref heap;
  std::size_t bytes;
  unsigned count;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    for (unsigned i = 0; i < count; ++i)
      out[i] = nrt::detail::heap_allocate(heap, bytes);
  }
};

// Thread 0 allocates 8 blocks of 16 bytes (neighbours: one word of block bits); then every thread
// frees one of them, each block by 8 threads at once (on the device 4 lanes of one warp each, the
// rest in other warps). One free per block counts; the other 56 are reported.

struct free_each_of_eight {
  nrt::heap_ref heap;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    nrt::detail::heap_deallocate(heap, out[t.global() % 8]);
  }
};

TEST(device_heap, a_block_freed_by_many_threads_at_once_is_freed_once) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  device_array<void*> out(8);
  gpumem::launch({1, 1}, allocate_blocks{heap.handle(), 16, 8, out.data()});
  for (void* p : out.to_host())
    ASSERT_NE(p, nullptr);
  gpumem::launch({2, 32}, free_each_of_eight{heap.handle(), out.data()});
  expect_logic_error([&] { heap.check(); }, "56 free(s) of pointers that are no block of the heap");
  // The slot's slab handed out 8 blocks and had 8 frees: trim() gives it back.
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "the slab's count was dropped more than once a block";
}

// Pointers no block starts at: inside a live 64-byte block, into a slab never taken, and a block
// never handed out of a slab that trim() gave back. Each is reported; the live block is then freed
// normally.

struct free_inside_and_elsewhere {
  nrt::heap_ref heap;
  void** out;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    char* const p = static_cast<char*>(out[0]);
    nrt::detail::heap_deallocate(heap, p + 16);  // inside the block
    char* const last_slab =
        heap.slabs + (static_cast<std::size_t>(heap.slab_count - 1) << heap.slab_shift);
    nrt::detail::heap_deallocate(heap, last_slab);  // a slab no block came from
    nrt::detail::heap_deallocate(heap, p);          // the block itself: counts
  }
};

TEST(device_heap, frees_of_pointers_no_small_block_starts_at_are_reported) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  device_array<void*> out(1);
  gpumem::launch({1, 1}, allocate_blocks{heap.handle(), 64, 1, out.data()});
  void* const block = out.to_host()[0];
  ASSERT_NE(block, nullptr);
  gpumem::launch({1, 1}, free_inside_and_elsewhere{heap.handle(), out.data()});
  expect_logic_error([&] { heap.check(); },
                     "2 free(s) of pointers that are no block of the heap (outside it, inside a "
                     "block, or a block freed twice), first 0x");
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "the block's free did not count";
  // Its slab is free again; its second block was never handed out.
  gpumem::launch({1, 1}, free_pointer{heap.handle(), static_cast<char*>(block) + 64});
  expect_logic_error([&] { heap.check(); }, "1 free(s)");
  EXPECT_EQ(heap.usage().used_bytes, 0u);
}

}  // namespace
