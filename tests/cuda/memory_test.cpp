// Device memory through the primitive layer: allocation, the zero-byte policy, out-of-memory
// reports, memory info, address ranges, the stream-ordered pool. Runs on both backends.
#include "backend_fixtures.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using gpumem::backend;
using gpumem::MiB;
using gpumem::test::device_buffer;

namespace {

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return v;
}

}  // namespace

TEST(cuda_memory, allocations_are_distinct_aligned_and_hold_data) {
  std::vector<std::unique_ptr<device_buffer>> buffers;
  std::set<void*> seen;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{255}, std::size_t{4096}, 3 * MiB}) {
    buffers.push_back(std::make_unique<device_buffer>(bytes));
    void* p = buffers.back()->get();
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u) << "allocation of " << bytes;
    EXPECT_TRUE(seen.insert(p).second) << "pointer handed out twice: " << p;
  }
  for (unsigned i = 0; i < buffers.size(); ++i) {
    auto const expected = pattern(buffers[i]->size(), i);
    backend().copy(buffers[i]->get(), expected.data(), expected.size());
  }
  for (unsigned i = 0; i < buffers.size(); ++i) {
    std::vector<std::uint8_t> back(buffers[i]->size(), 0);
    backend().copy(back.data(), buffers[i]->get(), back.size());
    EXPECT_EQ(back, pattern(buffers[i]->size(), i)) << "buffer " << i;
  }
}

TEST(cuda_memory, zero_bytes_gives_null_and_null_frees_are_no_ops) {
  auto& b = backend();
  EXPECT_EQ(b.allocate(0), nullptr);
  EXPECT_EQ(b.allocate_async(0, nullptr), nullptr);
  EXPECT_EQ(b.allocate_managed(0, true), nullptr);
  EXPECT_NO_THROW(b.deallocate(nullptr));
  EXPECT_NO_THROW(b.deallocate_async(nullptr, nullptr));
  EXPECT_NO_THROW(b.deallocate_managed(nullptr));
  EXPECT_NO_THROW(b.deallocate_pinned(nullptr));
  // Zero-byte copies and fills touch nothing, even through null pointers.
  EXPECT_NO_THROW(b.copy(nullptr, nullptr, 0));
  EXPECT_NO_THROW(b.fill(nullptr, 0, 0));
}

TEST(cuda_memory, out_of_memory_on_a_small_host_device_names_the_request_and_use) {
  auto small = gpumem::make_host_backend({/*capacity=*/1 * MiB});
  void* held = small->allocate(512 * gpumem::KiB);
  try {
    (void)small->allocate(768 * gpumem::KiB);
    ADD_FAILURE() << "768 KiB fitted into a 1 MiB device that holds 512 KiB";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 768 * gpumem::KiB);
    EXPECT_EQ(e.current_bytes(), 512 * gpumem::KiB);
    EXPECT_GE(e.peak_bytes(), 512 * gpumem::KiB);
    EXPECT_NE(e.allocator().find("host backend"), std::string::npos) << e.allocator();
    std::string const message = e.what();
    EXPECT_NE(message.find("768"), std::string::npos) << message;
    EXPECT_NE(message.find("allocate"), std::string::npos) << message;
  }
  EXPECT_THROW((void)small->allocate_async(2 * MiB, nullptr), gpumem::out_of_memory);
  EXPECT_THROW((void)small->allocate_managed(2 * MiB, true), gpumem::out_of_memory);
  small->deallocate(held);
  // The memory is back: the same request now succeeds.
  void* again = small->allocate(768 * gpumem::KiB);
  EXPECT_NE(again, nullptr);
  small->deallocate(again);
}

TEST(cuda_memory, out_of_memory_of_the_device_in_use) {
  auto& b = backend();
  device_buffer held(8 * MiB);
  gpumem::memory_info const info = b.get_memory_info();
  std::size_t const too_much = info.total + gpumem::GiB;
  int const device = b.current_device();
  std::string const expected_allocator =
      gpumem::test::on_cuda()
          ? "cuda device " + std::to_string(device) + " (" + b.identity(device).name + ")"
          : "host backend device";
  for (int form = 0; form < 2; ++form) {
    char const* const call = form == 0 ? "cudaMalloc" : "cudaMallocFromPoolAsync";
    try {
      void* p = form == 0 ? b.allocate(too_much) : b.allocate_async(too_much, nullptr);
      ADD_FAILURE() << "allocated " << too_much << " bytes on a device of " << info.total;
      if (form == 0) b.deallocate(p);
      if (form == 1) b.deallocate_async(p, nullptr);
    } catch (gpumem::out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), too_much);
      EXPECT_NE(e.allocator().find(expected_allocator), std::string::npos) << e.allocator();
      EXPECT_GE(e.current_bytes(), 8 * MiB) << "the held 8 MiB count as in use";
      EXPECT_GE(e.peak_bytes(), 8 * MiB) << "the held 8 MiB count towards the peak";
      if (gpumem::test::on_cuda()) {
        EXPECT_NE(std::string(e.what()).find(call), std::string::npos) << e.what();
      }
    }
  }
  // The failure left nothing behind: the device still allocates.
  device_buffer after(1 * MiB);
  EXPECT_NE(after.get(), nullptr);
}

// Sizes whose round-up (to 256 bytes, a page, CUDA's 2 MiB granularity) would wrap, and 2^63:
// every allocation call of the primitive layer refuses them as out_of_memory naming the size
// (the host backend's pinned allocation used to round SIZE_MAX to 0 and return a block).
TEST(cuda_memory, sizes_that_would_wrap_are_out_of_memory_on_every_allocation_call) {
  auto& b = backend();
  std::size_t const top = ~std::size_t{0};
  for (std::size_t const bytes :
       {top, top - 1, top - 255, top - 4095, top - 4096, top - 2 * MiB, std::size_t{1} << 63}) {
    for (int call = 0; call < 4; ++call) {
      try {
        void* p = call == 0   ? b.allocate(bytes)
                  : call == 1 ? b.allocate_async(bytes, nullptr)
                  : call == 2 ? b.allocate_managed(bytes, true)
                              : b.allocate_pinned(bytes, {});
        ADD_FAILURE() << "call " << call << " allocated " << bytes << " bytes at " << p;
      } catch (gpumem::out_of_memory const& e) {
        EXPECT_EQ(e.requested_bytes(), bytes) << "call " << call << ": " << e.what();
      }
    }
  }
  // A simulated device too large to map is refused when it is made, not rounded to a page.
  EXPECT_THROW((void)gpumem::make_host_backend({top - 1}), gpumem::cuda_error);
}

TEST(cuda_memory, a_host_device_aligns_to_at_least_256_bytes) {
  // Every resource promises 256-byte alignment: a simulated device that gave less would let a pool
  // carve misaligned blocks from its chunks. Refused with the value named.
  for (std::size_t const alignment :
       {std::size_t{0}, std::size_t{8}, std::size_t{128}, std::size_t{255}, std::size_t{384}}) {
    try {
      (void)gpumem::make_host_backend({MiB, alignment});
      ADD_FAILURE() << "alignment " << alignment << " was accepted";
    } catch (gpumem::logic_error const& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(alignment)), std::string::npos)
          << e.what();
    }
  }
  auto wide = gpumem::make_host_backend({16 * MiB, 4096});
  void* p = wide->allocate(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  wide->deallocate(p);
}

TEST(cuda_memory, memory_info_sees_an_allocation) {
  auto& b = backend();
  gpumem::memory_info const before = b.get_memory_info();
  ASSERT_GT(before.total, 0u);
  ASSERT_LE(before.free, before.total);
  std::size_t const bytes = 256 * MiB;
  ASSERT_LT(bytes, before.free) << "not enough free memory for this test";
  device_buffer held(bytes);
  gpumem::memory_info const during = b.get_memory_info();
  EXPECT_EQ(during.total, before.total);
  EXPECT_LE(during.free + bytes, before.free);
}

TEST(cuda_memory, address_range_of_an_interior_pointer_is_the_allocation) {
  auto& b = backend();
  std::size_t const bytes = 1 * MiB + 100;
  device_buffer first(bytes);
  device_buffer second(bytes);
  for (auto const* buffer : {&first, &second}) {
    auto* const base = buffer->as<std::uint8_t>();
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, bytes - 1}) {
      gpumem::address_range const r = b.get_address_range(base + offset);
      EXPECT_EQ(r.base, base) << "offset " << offset;
      EXPECT_GE(r.size, bytes) << "offset " << offset;
    }
  }
  int on_the_stack = 0;
  EXPECT_THROW((void)b.get_address_range(&on_the_stack), gpumem::cuda_error);
}

TEST(cuda_memory, managed_memory_is_host_accessible_and_has_an_address_range) {
  auto& b = backend();
  std::size_t const n = 4096;
  auto* p = static_cast<std::uint32_t*>(b.allocate_managed(n * sizeof(std::uint32_t), true));
  ASSERT_NE(p, nullptr);
  b.synchronize();
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<std::uint32_t>(i * 3);
  gpumem::address_range const r = b.get_address_range(p + 100);
  EXPECT_EQ(r.base, p);
  EXPECT_GE(r.size, n * sizeof(std::uint32_t));
  std::vector<std::uint32_t> back(n);
  b.copy(back.data(), p, n * sizeof(std::uint32_t));
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(back[i], i * 3) << i;
  b.deallocate_managed(p);
}

TEST(cuda_memory, stream_ordered_allocation_round_trip) {
  auto& b = backend();
  gpumem::test::scoped_stream stream;
  std::size_t const bytes = 2 * MiB;
  auto const expected = pattern(bytes, 9);
  std::vector<std::uint8_t> back(bytes, 0);
  void* p = b.allocate_async(bytes, stream.get());
  ASSERT_NE(p, nullptr);
  b.copy_async(p, expected.data(), bytes, stream.get());
  b.copy_async(back.data(), p, bytes, stream.get());
  b.deallocate_async(p, stream.get());
  b.synchronize_stream(stream.get());
  EXPECT_EQ(back, expected);
}

TEST(cuda_memory, async_release_threshold_returns_the_previous_value) {
  auto& b = backend();
  std::size_t const original = b.set_async_release_threshold(64 * MiB);
  EXPECT_EQ(b.set_async_release_threshold(128 * MiB), 64 * MiB);
  EXPECT_EQ(b.set_async_release_threshold(original), 128 * MiB);
  EXPECT_NO_THROW(b.trim_async_pool(0));
}

TEST(cuda_memory, freeing_a_pointer_twice_is_a_cuda_error) {
  auto& b = backend();
  if (gpumem::test::on_cuda())
    GTEST_SKIP() << "a double cudaFree is undefined on a real device; only the host backend "
                    "diagnoses it";
  void* p = b.allocate(4096);
  b.deallocate(p);
  EXPECT_THROW(b.deallocate(p), gpumem::cuda_error);
}

// A second free of a block whose stream-ordered free is still queued is refused at once. It used
// to be accepted: a second deallocate_async was only logged when its stream reached it, and a
// deallocate let the block be handed out again, so that the queued free then freed the new
// allocation under its owner.
TEST(cuda_memory, freeing_a_pointer_whose_stream_ordered_free_is_queued_is_a_cuda_error) {
  auto& b = backend();
  if (gpumem::test::on_cuda())
    GTEST_SKIP() << "a double free is undefined on a real device; only the host backend "
                    "diagnoses it";
  gpumem::test::scoped_stream stream;
  void* p = b.allocate(4096);
  {
    gpumem::test::stream_gate gate;
    gate.block(stream.get());
    b.deallocate_async(p, stream.get());
    EXPECT_THROW(b.deallocate_async(p, stream.get()), gpumem::cuda_error);
    EXPECT_THROW(b.deallocate_async(p, nullptr), gpumem::cuda_error);
    EXPECT_THROW(b.deallocate(p), gpumem::cuda_error);
    void* q = b.allocate(4096);  // not p: p is still allocated until the stream frees it
    EXPECT_NE(q, p);
    gate.open();
    b.synchronize_stream(stream.get());
    auto const range = b.get_address_range(q);  // still live: the queued free was p's only
    EXPECT_EQ(range.base, q);
    b.deallocate(q);
  }
  EXPECT_THROW(b.deallocate(p), gpumem::cuda_error);  // freed once, by the stream
}

TEST(cuda_memory, threads_allocating_at_once_get_disjoint_memory) {
  auto& b = backend();
  constexpr int threads = 4, rounds = 150;
  std::atomic<int> corrupted{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::uniform_int_distribution<std::size_t> size(1, 256 * gpumem::KiB);
      struct block {
        void* p;
        std::size_t bytes;
        bool stream_ordered;
      };
      std::vector<block> live;
      auto const release = [&](block const& k) {
        if (k.stream_ordered) {
          b.deallocate_async(k.p, b.per_thread_default_stream());
        } else {
          b.deallocate(k.p);
        }
      };
      for (int r = 0; r < rounds; ++r) {
        std::size_t const bytes = size(rng);
        bool const stream_ordered = r % 3 == 0;
        void* p = stream_ordered ? b.allocate_async(bytes, b.per_thread_default_stream())
                                 : b.allocate(bytes);
        std::uint8_t const tag = static_cast<std::uint8_t>(t * 50 + r);
        b.fill_async(p, tag, bytes, b.per_thread_default_stream());
        b.synchronize_stream(b.per_thread_default_stream());
        live.push_back({p, bytes, stream_ordered});
        if (live.size() > 6 || r == rounds - 1) {
          // Check and free the oldest: another thread's writes would have changed its bytes.
          block const oldest = live.front();
          std::vector<std::uint8_t> back(oldest.bytes);
          b.copy(back.data(), oldest.p, oldest.bytes);
          std::uint8_t const expected =
              static_cast<std::uint8_t>(t * 50 + r - static_cast<int>(live.size()) + 1);
          for (std::uint8_t byte : back) {
            if (byte != expected) {
              ++corrupted;
              break;
            }
          }
          release(oldest);
          live.erase(live.begin());
        }
      }
      for (block const& k : live)
        release(k);
      b.synchronize_stream(b.per_thread_default_stream());
    });
  }
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(corrupted.load(), 0);
}
