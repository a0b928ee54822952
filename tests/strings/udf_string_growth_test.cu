// The growth rule of string buffers (strings/detail/heap.hpp) against the heap they come from:
// doubling, powers of two up to 64 KiB on either heap; above, all that the heap's block holds on
// gpumem's slab heap (whole slabs, whatever their size) and only the doubled size on cuda_malloc
// (CUDA's malloc, std::malloc on the host backend), whose blocks hold what was asked. Then a
// udf_string's reserve() in a kernel on a memory system of each kind.
#include "core_test_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/nrt/device_heap.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/memsys.hpp>
#include <gpumem/strings/detail/heap.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <gtest/gtest.h>

#include <cstddef>

namespace nrt = gpumem::nrt;
namespace strings = gpumem::strings;
using gpumem::KiB;
using gpumem::MiB;
using gpumem::test::device_array;
using strings::size_type;

namespace {

nrt::heap_options slab_heap(std::size_t slab_bytes) {
  nrt::heap_options o;
  o.bytes = 8 * MiB;
  o.slab_bytes = slab_bytes;
  return o;
}

nrt::heap_options malloc_heap() {
  nrt::heap_options o;
  o.kind = nrt::heap_kind::cuda_malloc;
  // CUDA's default 8 MiB: CUDA refuses to resize its malloc heap once a kernel that may call malloc
  // has run, and earlier tests' kernels (which contain the cuda_malloc branch) have.
  o.bytes = 8 * MiB;
  return o;
}

size_type grown(nrt::device_heap const& heap, size_type current, size_type needed) {
  return strings::detail::grown_capacity(heap.handle(), current, needed,
                                         strings::udf_string::minimum_capacity);
}

TEST(string_growth, up_to_64_kib_capacities_double_to_powers_of_two_on_either_heap) {
  nrt::device_heap slabs(slab_heap(128 * KiB));
  nrt::device_heap by_malloc(malloc_heap());
  for (nrt::device_heap const* heap : {&slabs, &by_malloc}) {
    EXPECT_EQ(grown(*heap, 0, 1), 16);
    EXPECT_EQ(grown(*heap, 16, 17), 32);
    EXPECT_EQ(grown(*heap, 0, 5000), 8192);
    EXPECT_EQ(grown(*heap, 32768, 40000), 65536);
    EXPECT_EQ(grown(*heap, 65536, 65537), 131072);  // doubled: no rounding needed
  }
}

TEST(string_growth, above_64_kib_the_slab_heap_gives_whole_slabs) {
  nrt::device_heap slabs_128k(slab_heap(128 * KiB));
  EXPECT_EQ(grown(slabs_128k, 0, 70000), 131072);
  EXPECT_EQ(grown(slabs_128k, 131072, 300000), 393216);
  nrt::device_heap slabs_64k(slab_heap(64 * KiB));
  EXPECT_EQ(grown(slabs_64k, 0, 70000), 131072);
  EXPECT_EQ(grown(slabs_64k, 0, 140000), 196608);
  nrt::device_heap slabs_1m(slab_heap(1 * MiB));
  EXPECT_EQ(grown(slabs_1m, 0, 70000), 1048576);
}

TEST(string_growth, above_64_kib_cuda_malloc_gets_only_the_doubled_size) {
  nrt::device_heap by_malloc(malloc_heap());
  EXPECT_EQ(grown(by_malloc, 0, 70000), 70000);
  EXPECT_EQ(grown(by_malloc, 131072, 300000), 300000);
  EXPECT_EQ(grown(by_malloc, 100000, 150000), 200000);
}

struct reserve_kernel {
  size_type bytes;
  unsigned long long* capacity;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    strings::udf_string s;
    if (s.reserve(bytes)) *capacity = static_cast<unsigned long long>(s.capacity());
  }
};

TEST(string_growth, reserve_takes_what_the_memory_systems_heap_gives) {
  struct heap_case {
    nrt::heap_options heap;
    unsigned long long capacity;
  };
  for (heap_case const& c :
       {heap_case{slab_heap(128 * KiB), 131072}, heap_case{malloc_heap(), 70000}}) {
    nrt::memsys ms(c.heap, nrt::memsys_options{true});
    device_array<unsigned long long> capacity(1);
    nrt::launch(ms, {1, 1}, reserve_kernel{70000, capacity.data()});
    EXPECT_EQ(capacity.to_host()[0], c.capacity) << ms.heap().name();
    gpumem::test::expect_memsys_balanced(ms);
  }
}

}  // namespace
