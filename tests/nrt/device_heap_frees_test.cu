// The device heap's bad frees on both backends: a pointer outside the heap, inside a block (small
// or large), a large block freed twice, and a small block freed twice on a checked heap
// (heap_options::check_frees), where it must not release its slab while another block is live.
#include "nrt_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

using gpumem::test::device_array;
namespace nrt = gpumem::nrt;

namespace {

// check() must throw logic_error naming `count` refused frees.
void expect_refused_frees(nrt::device_heap& heap, unsigned count) {
  try {
    heap.check();
    FAIL() << "check() should report the invalid free(s)";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(count) +
                                         " free(s) of pointers that are no block"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(heap.check()) << "check() clears what it reported";
}

struct free_foreign {
  nrt::heap_ref heap;
  void* foreign;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    nrt::detail::heap_deallocate(heap, foreign);
  }
};

TEST(device_heap, freeing_a_pointer_outside_the_heap_is_reported) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  device_array<unsigned> foreign(16);
  gpumem::launch({1, 1}, free_foreign{heap.handle(), foreign.data()});
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

// A pointer inside a small block (not at a multiple of its class's size in its slab) is refused on
// any heap: counted against the slab, it would release the slab while its blocks are live.
struct inner_small_free {
  nrt::heap_ref heap;
  std::size_t inner[2];  // offsets into the block (not constants: g++ would warn of free(a + 16))
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    char* const a = static_cast<char*>(nrt::detail::heap_allocate(heap, 64));
    nrt::detail::heap_deallocate(heap, a + inner[0]);
    nrt::detail::heap_deallocate(heap, a + inner[1]);
    nrt::detail::heap_deallocate(heap, a);
  }
};

TEST(device_heap, a_pointer_inside_a_small_block_is_reported) {
  nrt::device_heap heap(nrt::heap_options{2 * gpumem::MiB});
  std::size_t volatile sixteen = 16;
  gpumem::launch({1, 1}, inner_small_free{heap.handle(), {sixteen, sixteen + 47}});
  expect_refused_frees(heap, 2);
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u) << "the block's slab leaked";
}

// One slab of the 16-byte class: x stays live, y is freed twice, every other block is allocated
// and freed, and the slab retires. Unchecked, the second free of y would make the slab's count
// reach zero and release it while x is live; checked, it is refused and the slab stays until x
// goes. (Many threads, one block each: a long loop in one thread is slow under compute-sanitizer.)
// The second free is the point: GCC 12, seeing through the host path at -O3, calls it a use after
// free.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
struct double_free_one {
  nrt::heap_ref heap;
  void** live;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    void* const x = nrt::detail::heap_allocate(heap, 16);
    void* const y = nrt::detail::heap_allocate(heap, 16);
    nrt::detail::heap_deallocate(heap, y);
    nrt::detail::heap_deallocate(heap, y);  // the second free
    live[0] = x;
  }
};
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

// Threads [0, n) each allocate a block of `bytes` and free it (kept == null) or keep it in kept[i].
struct alloc_each {
  nrt::heap_ref heap;
  std::size_t bytes;
  unsigned long long n;
  void** kept;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* const p = nrt::detail::heap_allocate(heap, bytes);
    if (kept == nullptr)
      nrt::detail::heap_deallocate(heap, p);
    else
      kept[t.global()] = p;
  }
};

// Threads [0, n) each free blocks[i].
struct free_each {
  nrt::heap_ref heap;
  unsigned long long n;
  void* const* blocks;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) nrt::detail::heap_deallocate(heap, blocks[t.global()]);
  }
};

void launch_each(alloc_each const& kernel) {
  gpumem::launch({static_cast<unsigned>((kernel.n + 255) / 256), 256}, kernel);
}

TEST(device_heap, a_small_block_freed_twice_is_reported_on_a_checked_heap) {
  nrt::heap_options options{4 * gpumem::MiB};
  options.check_frees = true;
  options.shards = 1;
  nrt::device_heap heap(options);
  device_array<void*> live(1);
  gpumem::launch({1, 1}, double_free_one{heap.handle(), live.data()});
  launch_each(
      alloc_each{heap.handle(), 16, nrt::detail::class_capacity(heap.handle(), 0) - 2u, nullptr});
  expect_refused_frees(heap, 1);
  // x's slab, and the slot's next one.
  EXPECT_EQ(heap.usage().used_bytes, 2 * heap.slab_bytes()) << "x's slab was released";
  gpumem::launch({1, 1}, free_each{heap.handle(), 1, live.data()});
  EXPECT_NO_THROW(heap.check());
  heap.trim();
  EXPECT_EQ(heap.usage().used_bytes, 0u);
}

TEST(device_heap, a_checked_heap_reports_a_free_into_a_free_slab) {
  nrt::heap_options options{4 * gpumem::MiB};
  nrt::device_heap plain(options);
  options.check_frees = true;
  options.shards = 1;
  nrt::device_heap checked(options);
  // Its bits take 1/128 of the slabs' bytes from the region.
  EXPECT_GE(checked.capacity(), plain.capacity() - plain.capacity() / 64);
  device_array<void*> live(1);
  gpumem::launch({1, 1}, double_free_one{checked.handle(), live.data()});
  launch_each(alloc_each{checked.handle(), 16,
                         nrt::detail::class_capacity(checked.handle(), 0) - 2u, nullptr});
  gpumem::launch({1, 1}, free_each{checked.handle(), 1, live.data()});
  expect_refused_frees(checked, 1);
  checked.trim();
  // x's slab is free now: freeing x again is a free into a free slab.
  gpumem::launch({1, 1}, free_each{checked.handle(), 1, live.data()});
  expect_refused_frees(checked, 1);
  EXPECT_EQ(checked.usage().used_bytes, 0u);
}

// A checked heap's slabs go through generations (taken, filled, freed, released, taken again, or
// released by trim() with blocks never handed out): no free of a live block may be refused.
TEST(device_heap, a_checked_heap_refuses_no_valid_free_across_slab_generations) {
  nrt::heap_options options{2 * gpumem::MiB};
  options.check_frees = true;
  options.shards = 1;
  nrt::device_heap heap(options);
  // Each round another class, so that a slab's blocks start where another class's did not.
  std::size_t const sizes[] = {64, 16, 1024, 32, 4096, 16, 256, 64 * 1024, 16};
  device_array<void*> kept(7);
  int round = 0;
  for (std::size_t bytes : sizes) {
    unsigned const cls = nrt::detail::size_class(bytes);
    std::uint32_t const per_slab = nrt::detail::class_capacity(heap.handle(), cls);
    // Two and a half slabs freed at once, then a few blocks kept across a trim() that releases
    // the slot's slab with most of its blocks never handed out.
    launch_each(alloc_each{heap.handle(), bytes, per_slab * 5 / 2, nullptr});
    launch_each(alloc_each{heap.handle(), bytes, 7, kept.data()});
    gpumem::launch({1, 7}, free_each{heap.handle(), 7, kept.data()});
    EXPECT_NO_THROW(heap.check()) << "round " << round << ", " << bytes << " B";
    heap.trim();
    EXPECT_EQ(heap.usage().used_bytes, 0u) << "round " << round << ", " << bytes << " B";
    ++round;
  }
}

}  // namespace
