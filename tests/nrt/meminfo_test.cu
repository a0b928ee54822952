// Reference counting through the NRT C API and nrt::ref, on both backends: the lifecycle the string
// UDF spec walks through (create, assign, store into an output array, scope exit, freeing kernel),
// exactly-once destruction under many concurrent last decrefs, dtor_info, decref at zero, and
// NRT_MemInfo_alloc_aligned. Functors are named structs (nvcc forbids extended lambdas inside
// gtest's private TestBody).
#include "nrt_support.hpp"

#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/nrt/ref.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using gpumem::test::device_array;

namespace {

using nrt_test = gpumem::test::nrt_fixture;

// An object with a destructor that reports itself.
struct payload {
  unsigned id;
  unsigned* destroyed;  // destroyed[id] counts destructor runs
  GPUMEM_HD payload(unsigned i, unsigned* d) : id(i), destroyed(d) {}
  GPUMEM_HD ~payload() { gpumem::atomic_fetch_add(&destroyed[id], 1u); }
};

constexpr unsigned steps = 8;

// Phase 1-4 of the spec's lifecycle, one object per thread; records use_count after each step.
struct lifecycle_kernel {
  unsigned n;
  unsigned* destroyed;
  unsigned long long* counts;  // [n][steps]
  NRT_MemInfo** out;           // the output array
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    auto const i = static_cast<unsigned>(t.global());
    if (i >= n) return;
    unsigned long long* c = counts + std::size_t{i} * steps;
    auto created = gpumem::nrt::make_ref<payload>(i, destroyed);  // a new object: 1
    if (!created) return;
    c[0] = created.use_count();
    {
      gpumem::nrt::ref<payload> inner = created;  // copy: 2
      c[1] = inner.use_count();
    }  // scope exit: 1
    c[2] = created.use_count();
    gpumem::nrt::ref<payload> result;
    result = created;  // assignment increfs: 2
    c[3] = result.use_count();
    gpumem::nrt::ref<payload> moved = std::move(result);  // a move neither increfs nor decrefs
    c[4] = moved.use_count() + (result ? 1000u : 0u);
    out[i] = moved.retain();  // setitem into the output array: 3
    c[5] = moved.use_count();
    c[6] = moved->id == i ? 1 : 0;
    c[7] = destroyed[i];
  }  // created, moved go out of scope: 1 (the output array's)
};

// Phase 5: the freeing kernel drops the output array's references.
struct free_kernel {
  unsigned n;
  NRT_MemInfo** out;
  unsigned long long* before;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    auto const i = static_cast<unsigned>(t.global());
    if (i >= n) return;
    before[i] = gpumem::atomic_load(&out[i]->refct);
    NRT_decref(out[i]);
  }
};

TEST_F(nrt_test, ref_lifecycle_as_in_the_spec) {
  unsigned const n = 2048;
  device_array<unsigned> destroyed(n);
  device_array<unsigned long long> counts(std::size_t{n} * steps);
  device_array<NRT_MemInfo*> out(n);
  device_array<unsigned long long> before(n);
  gpumem::nrt::launch(ms(), {n / 128, 128},
                      lifecycle_kernel{n, destroyed.data(), counts.data(), out.data()});
  std::vector<unsigned long long> const c = counts.to_host();
  std::vector<unsigned long long> const expected{1, 2, 1, 2, 2, 3, 1, 0};
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned s = 0; s < steps; ++s)
      ASSERT_EQ(c[std::size_t{i} * steps + s], expected[s]) << "thread " << i << " step " << s;
  }
  for (unsigned d : destroyed.to_host())
    ASSERT_EQ(d, 0u) << "destroyed while the output array still refers to it";
  gpumem::nrt::launch(ms(), {n / 128, 128}, free_kernel{n, out.data(), before.data()});
  for (unsigned long long b : before.to_host())
    ASSERT_EQ(b, 1u) << "the output array should hold the last reference";
  for (unsigned d : destroyed.to_host())
    ASSERT_EQ(d, 1u) << "each object must be destroyed exactly once";
  gpumem::nrt::memsys_statistics const s = ms().statistics();
  EXPECT_EQ(s.mi_alloc, n);
  EXPECT_EQ(s.alloc, n);
}

// What a destructor saw.
struct dtor_record {
  unsigned calls;
  unsigned long long data;
  unsigned long long size;
};

GPUMEM_HD void record_dtor(void* data, size_t size, void* info) {
  auto* r = static_cast<dtor_record*>(info);
  gpumem::atomic_fetch_add(&r->calls, 1u);
  r->data = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(data));
  r->size = size;
}

constexpr unsigned objects = 64;

struct create_objects {
  NRT_MemInfo** slots;
  dtor_record* records;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    auto const i = static_cast<unsigned>(t.global());
    if (i >= objects) return;
    void* const data = NRT_Allocate(48);
    slots[i] = NRT_MemInfo_new(data, 48, &record_dtor, &records[i]);
  }
};

struct incref_many {
  NRT_MemInfo** slots;
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) NRT_incref(slots[t.global() % objects]);
  }
};

struct decref_many {
  NRT_MemInfo** slots;
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) NRT_decref(slots[t.global() % objects]);
  }
};

// Frees the data blocks the dtors reported (they were NRT_Allocate'd separately).
struct free_data {
  dtor_record* records;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < objects)
      NRT_Free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(records[t.global()].data)));
  }
};

TEST_F(nrt_test, many_last_decrefs_run_the_destructor_exactly_once_with_dtor_info) {
  unsigned const n = 64 * 256;  // 256 references per object
  device_array<NRT_MemInfo*> slots(objects);
  device_array<dtor_record> records(objects);
  gpumem::nrt::launch(ms(), {1, objects}, create_objects{slots.data(), records.data()});
  std::vector<NRT_MemInfo*> const mis = slots.to_host();
  for (NRT_MemInfo* mi : mis)
    ASSERT_NE(mi, nullptr);
  gpumem::nrt::launch(ms(), {n / 256, 256}, incref_many{slots.data(), n});
  // Drop the creation reference of each object first, then let n threads race for the last ones.
  gpumem::nrt::launch(ms(), {1, objects}, decref_many{slots.data(), objects});
  for (dtor_record const& r : records.to_host())
    ASSERT_EQ(r.calls, 0u) << "destroyed early";
  gpumem::nrt::launch(ms(), {n / 256, 256}, decref_many{slots.data(), n});
  std::vector<dtor_record> const after = records.to_host();
  for (unsigned i = 0; i < objects; ++i) {
    EXPECT_EQ(after[i].calls, 1u) << "object " << i;
    EXPECT_EQ(after[i].size, 48u) << "dtor got the wrong size";
    EXPECT_NE(after[i].data, 0u) << "dtor got no data pointer";
  }
  gpumem::nrt::launch(ms(), {1, objects}, free_data{records.data()});
}

struct decref_dead {
  NRT_MemInfo* mi;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const { NRT_decref(mi); }
};

TEST_F(nrt_test, decref_at_zero_is_reported_and_never_wraps) {
  device_array<NRT_MemInfo> dead(1);  // refct 0, no dtor: an object already destroyed
  device_array<dtor_record> record(1);
  NRT_MemInfo init{};
  init.dtor = nullptr;
  gpumem::backend().copy(dead.data(), &init, sizeof(init));
  gpumem::nrt::launch(ms(), {4, 32}, decref_dead{dead.data()});
  EXPECT_EQ(dead.to_host()[0].refct, 0u) << "the count must stay at zero, not wrap";
  try {
    ms().check();
    FAIL() << "check() should report the decref at zero";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("128 reference count operation"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(ms().check()) << "check() clears what it reported";
}

struct incref_dead {
  NRT_MemInfo* mi;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const { NRT_incref(mi); }
};

// One thread: an incref from zero is reported and undone (the object stays dead). Increfs of a
// dead object by many threads at once cannot all be told from increfs of a live one (the second
// sees 1), so only the first is guaranteed to be caught; that is not tested here.
TEST_F(nrt_test, incref_at_zero_is_reported_and_undone) {
  device_array<NRT_MemInfo> dead(1);
  gpumem::nrt::launch(ms(), {1, 1}, incref_dead{dead.data()});
  EXPECT_EQ(dead.to_host()[0].refct, 0u) << "a dead object must stay dead";
  try {
    ms().check();
    FAIL() << "check() should report the incref at zero";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("1 reference count operation"), std::string::npos)
        << e.what();
  }
}

struct aligned_kernel {
  unsigned* ok;  // [aligns]
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    unsigned const align = 1u << t.thread;  // 1 .. 4096
    NRT_MemInfo* const mi = NRT_MemInfo_alloc_aligned(100, align);
    if (mi == nullptr) return;
    auto const data = reinterpret_cast<std::uintptr_t>(mi->data);
    bool good = data % align == 0 && data >= reinterpret_cast<std::uintptr_t>(mi + 1) &&
                mi->size == 100 && mi->refct == 1;
    auto* bytes = static_cast<unsigned char*>(NRT_MemInfo_data_fast(mi));
    for (unsigned b = 0; b < 100; ++b)
      bytes[b] = static_cast<unsigned char>(b);
    for (unsigned b = 0; b < 100; ++b)
      good = good && bytes[b] == b;
    ok[t.thread] = good ? 1 : 2;
    NRT_decref(mi);
  }
};

struct bad_align_kernel {
  unsigned* ok;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    ok[0] = NRT_MemInfo_alloc_aligned(16, 24) == nullptr ? 1 : 2;
  }
};

TEST_F(nrt_test, alloc_aligned_honours_the_alignment) {
  device_array<unsigned> ok(13);
  gpumem::nrt::launch(ms(), {1, 13}, aligned_kernel{ok.data()});
  std::vector<unsigned> const r = ok.to_host();
  for (unsigned i = 0; i < 13; ++i)
    EXPECT_EQ(r[i], 1u) << "alignment " << (1u << i);
  device_array<unsigned> bad(1);
  gpumem::nrt::launch(ms(), {1, 1}, bad_align_kernel{bad.data()});
  EXPECT_EQ(bad.to_host()[0], 1u) << "a non-power-of-two alignment must give null";
}

// The NRT entry points with sizes that cannot be served: NRT_Allocate near SIZE_MAX, and
// NRT_MemInfo_alloc_aligned where the header, the alignment slack (up to 4095 bytes) and the size
// together pass SIZE_MAX. Every answer must be null (the sum used to wrap to a small block whose
// meminfo claimed SIZE_MAX bytes).
struct wrapping_sizes_kernel {
  unsigned long long* out;  // [0] non-null answers, [1] calls made
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    std::size_t const top = ~std::size_t{0};
    std::size_t const half = std::size_t{1} << 63;
    std::size_t const sizes[] = {top, top - 1, top - 40, top - 255, top - 4096, half, half + 1};
    for (std::size_t const bytes : sizes) {
      void* const p = NRT_Allocate(bytes);
      out[0] += p != nullptr ? 1 : 0;
      out[1] += 1;
      for (unsigned align = 1; align <= 4096; align <<= 1) {
        NRT_MemInfo* const mi = NRT_MemInfo_alloc_aligned(bytes, align);
        out[0] += mi != nullptr ? 1 : 0;
        out[1] += 1;
      }
    }
  }
};

TEST_F(nrt_test, sizes_that_would_wrap_give_null_and_check_reports_out_of_memory) {
  device_array<unsigned long long> out(2);
  gpumem::nrt::launch(ms(), {1, 1}, wrapping_sizes_kernel{out.data()});
  std::vector<unsigned long long> const r = out.to_host();
  EXPECT_EQ(r[0], 0u) << "a size that cannot be served was given memory";
  try {
    ms().check();
    FAIL() << "check() should report the failed requests";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), ~std::size_t{0}) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(r[1]) + " device allocation(s)"),
              std::string::npos)
        << e.what();
  }
  gpumem::nrt::memsys_statistics const s = ms().statistics();
  EXPECT_EQ(s.alloc + s.mi_alloc, 0u) << "a failed request was counted as an allocation";
}

struct alloc_free_kernel {
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    void* p = NRT_Allocate(16 + (t.global() % 7) * 40);
    NRT_Free(p);
  }
};

TEST_F(nrt_test, statistics_count_every_call_and_can_be_switched) {
  unsigned const n = 5000;
  gpumem::nrt::launch(ms(), {(n + 127) / 128, 128}, alloc_free_kernel{n});
  gpumem::nrt::memsys_statistics s = ms().statistics();
  EXPECT_EQ(s.alloc, n);
  EXPECT_EQ(s.free, n);
  EXPECT_EQ(s.mi_alloc, 0u);
  ms().disable_statistics();
  EXPECT_FALSE(ms().statistics_enabled());
  EXPECT_THROW(ms().statistics(), gpumem::logic_error);
  gpumem::nrt::launch(ms(), {(n + 127) / 128, 128}, alloc_free_kernel{n});
  ms().enable_statistics();
  s = ms().statistics();
  EXPECT_EQ(s.alloc, n) << "nothing is counted while statistics are off";
  ms().reset_statistics();
  s = ms().statistics();
  EXPECT_EQ(s.alloc + s.free + s.mi_alloc + s.mi_free, 0u);
}

// Frees the heap refuses next to ones it takes: a pointer outside the heap, pointers inside a small
// and a large block, a large block's second free; with `twice`, also a small block's second free
// (refused on a checked heap only).
struct refused_frees_kernel {
  unsigned char* outside;
  bool twice;
  GPUMEM_HD void operator()(gpumem::thread_index const&) const {
    auto* const small = static_cast<unsigned char*>(NRT_Allocate(100));
    auto* const large = static_cast<unsigned char*>(NRT_Allocate(200 * 1024));
    if (small == nullptr || large == nullptr) return;
    NRT_Free(outside);
    NRT_Free(small + 16);
    NRT_Free(large + 16);
    NRT_Free(large);
    NRT_Free(large);
    NRT_Free(small);
    if (twice) NRT_Free(small);
  }
};

void expect_refused_frees(gpumem::nrt::memsys& ms, unsigned count) {
  try {
    ms.check();
    FAIL() << "check() should report the refused frees";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(count) + " free(s) of pointers"),
              std::string::npos)
        << e.what();
  }
}

// statistics().free counts the frees the heap took (docs/nrt.md): a refused free is reported by
// check() and not counted, so it cannot hide a leak by balancing it.
TEST_F(nrt_test, statistics_do_not_count_frees_the_heap_refused) {
  device_array<unsigned char> outside(64);  // device memory, not the heap's
  gpumem::nrt::launch(ms(), {1, 1}, refused_frees_kernel{outside.data(), false});
  gpumem::nrt::memsys_statistics const s = ms().statistics();
  EXPECT_EQ(s.alloc, 2u);
  EXPECT_EQ(s.free, 2u) << "refused frees were counted";
  expect_refused_frees(ms(), 4);

  gpumem::nrt::heap_options checked{4 * gpumem::MiB};
  checked.check_frees = true;
  gpumem::nrt::memsys checked_ms(checked, gpumem::nrt::memsys_options{true});
  gpumem::nrt::launch(checked_ms, {1, 1}, refused_frees_kernel{outside.data(), true});
  gpumem::nrt::memsys_statistics const c = checked_ms.statistics();
  EXPECT_EQ(c.alloc, 2u);
  EXPECT_EQ(c.free, 2u) << "a small block's second free on a checked heap was counted";
  expect_refused_frees(checked_ms, 5);
}

struct big_payload {
  unsigned char bytes[4000];
};

struct drop_kernel {
  NRT_MemInfo** out;
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() < n) NRT_decref(out[t.global()]);  // null-safe
  }
};

struct exhaust_big_kernel {
  NRT_MemInfo** out;
  unsigned n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= n) return;
    auto r = gpumem::nrt::make_ref<big_payload>();
    out[t.global()] = r.release();  // keep everything alive: the heap must run out
  }
};

// Aligned beyond the heap's blocks (256 bytes), with a destructor that counts.
struct alignas(4096) page_aligned {
  unsigned* destroyed;
  GPUMEM_HD explicit page_aligned(unsigned* d) : destroyed(d) {}
  GPUMEM_HD ~page_aligned() { gpumem::atomic_fetch_add(destroyed, 1u, gpumem::mem_order::relaxed); }
};

struct aligned_ref_kernel {
  unsigned* misaligned;
  unsigned* destroyed;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() >= 32) return;
    auto r = gpumem::nrt::make_ref<page_aligned>(destroyed);
    if (!r) return;
    if (reinterpret_cast<std::uintptr_t>(r.get()) % alignof(page_aligned) != 0)
      gpumem::atomic_fetch_add(misaligned, 1u, gpumem::mem_order::relaxed);
  }
};

TEST_F(nrt_test, make_ref_places_an_over_aligned_object_at_its_alignment) {
  device_array<unsigned> counts(2);
  gpumem::nrt::launch(ms(), {1, 32}, aligned_ref_kernel{counts.data(), counts.data() + 1});
  std::vector<unsigned> const got = counts.to_host();
  EXPECT_EQ(got[0], 0u) << "objects not at their alignment";
  // Each thread's object, destroyed once (TearDown checks that every block came back).
  EXPECT_EQ(got[1], 32u);
}

TEST_F(nrt_test, make_ref_on_an_exhausted_heap_gives_null_and_check_throws) {
  unsigned const n = 20000;  // 20000 x 4 KiB blocks > 64 MiB
  device_array<NRT_MemInfo*> out(n);
  gpumem::nrt::launch(ms(), {(n + 127) / 128, 128}, exhaust_big_kernel{out.data(), n});
  std::vector<NRT_MemInfo*> const got = out.to_host();
  std::size_t nulls = 0;
  for (NRT_MemInfo* mi : got)
    nulls += mi == nullptr ? 1 : 0;
  EXPECT_GT(nulls, 0u);
  EXPECT_LT(nulls, n);
  try {
    ms().check();
    FAIL() << "check() should throw out_of_memory";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), sizeof(gpumem::nrt::detail::co_allocated<big_payload>));
    EXPECT_NE(e.allocator().find("gpumem device heap"), std::string::npos) << e.what();
  }
  // Nothing is lost: the freeing kernel gives everything back (TearDown checks balance and use).
  gpumem::nrt::launch(ms(), {(n + 127) / 128, 128}, drop_kernel{out.data(), n});
}

}  // namespace
