// Virtual memory through the primitive layer: reserve an address range, back it with physical
// chunks, map / unmap / remap, the device's capacity, bad input, and leaks. Runs on both backends
// (on the cuda backend through the driver's VMM API; skipped with a reason on a device without
// it). Tests that need a small device make a private host backend, so they run in both executables.
#include "backend_fixtures.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using gpumem::backend;
using gpumem::device_backend;
using gpumem::MiB;
using gpumem::physical_handle;

namespace {

#define GPUMEM_SKIP_UNLESS_VMM(b)                                               \
  do {                                                                          \
    if ((b).vmm_granularity() == 0)                                             \
      GTEST_SKIP() << "the device does not support virtual memory management (" \
                   << (b).description() << ")";                                 \
  } while (0)

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

std::vector<std::uint8_t> read_back(device_backend& b, void const* src, std::size_t bytes) {
  std::vector<std::uint8_t> v(bytes, 0);
  b.copy(v.data(), src, bytes);
  return v;
}

void* at(void* base, std::size_t offset) {
  return static_cast<std::uint8_t*>(base) + offset;
}

std::string address_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

std::string handle_number(physical_handle h) {
  return std::to_string(static_cast<std::uint64_t>(h));
}

// Expects `call` to throw exactly gpumem::logic_error with `value` in its message.
template <class Call>
void expect_logic_error(Call call, std::string const& value, char const* what) {
  try {
    call();
    ADD_FAILURE() << what << ": no exception";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find(value), std::string::npos)
        << what << ": the message does not name " << value << ": " << e.what();
  } catch (std::exception const& e) {
    ADD_FAILURE() << what << ": threw something other than logic_error: " << e.what();
  }
}

// What a test reserved, created and mapped, given back in reverse order when the test ends, even
// after a failed assertion (compute-sanitizer's leak check runs on the GPU suite).
class vmm_scope {
 public:
  explicit vmm_scope(device_backend& b = backend()) : b_(b) {}
  ~vmm_scope() {
    for (auto it = mappings_.rbegin(); it != mappings_.rend(); ++it)
      step([&] { b_.unmap(it->first, it->second); });
    for (physical_handle h : chunks_)
      step([&] { b_.release_physical(h); });
    for (auto const& [base, bytes] : ranges_)
      step([&, base = base, bytes = bytes] { b_.release_address_range(base, bytes); });
  }
  vmm_scope(vmm_scope const&) = delete;
  vmm_scope& operator=(vmm_scope const&) = delete;

  void* reserve(std::size_t bytes) {
    void* base = b_.reserve_address_range(bytes);
    ranges_.emplace_back(base, bytes);
    return base;
  }
  physical_handle create(std::size_t bytes) {
    physical_handle const h = b_.create_physical(bytes);
    chunks_.push_back(h);
    return h;
  }
  void map(void* address, std::size_t bytes, physical_handle h) {
    b_.map_physical(address, bytes, h);
    mappings_.emplace_back(address, bytes);
  }
  void unmap(void* address, std::size_t bytes) {
    b_.unmap(address, bytes);
    mappings_.erase(std::find(mappings_.begin(), mappings_.end(), std::make_pair(address, bytes)));
  }
  void release(physical_handle h) {
    b_.release_physical(h);
    chunks_.erase(std::find(chunks_.begin(), chunks_.end(), h));
  }
  void release_range(void* base, std::size_t bytes) {
    b_.release_address_range(base, bytes);
    ranges_.erase(std::find(ranges_.begin(), ranges_.end(), std::make_pair(base, bytes)));
  }

 private:
  template <class Step>
  static void step(Step&& teardown_step) {
    try {
      teardown_step();
    } catch (std::exception const& e) {
      ADD_FAILURE() << "virtual-memory teardown failed: " << e.what();
    }
  }

  device_backend& b_;
  std::vector<std::pair<void*, std::size_t>> ranges_;
  std::vector<physical_handle> chunks_;
  std::vector<std::pair<void*, std::size_t>> mappings_;
};

}  // namespace

TEST(cuda_vmm, granularity_is_a_power_of_two) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  EXPECT_GT(g, 0u);
  EXPECT_EQ(g & (g - 1), 0u) << g;
  EXPECT_EQ(b.vmm_granularity(), g) << "the granularity of one device does not change";
  if (!gpumem::test::on_cuda()) {
    EXPECT_EQ(g, 2 * MiB) << "the host backend simulates a GPU's granularity";
  }
}

TEST(cuda_vmm, two_chunks_side_by_side_are_one_contiguous_range) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  vmm_scope vmm(b);
  void* base = vmm.reserve(3 * g);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(base) % g, 0u) << "reservation " << base;
  physical_handle const first = vmm.create(g);
  physical_handle const second = vmm.create(g);
  EXPECT_NE(first, second);
  EXPECT_NE(first, physical_handle::none);
  vmm.map(base, g, first);
  vmm.map(at(base, g), g, second);

  b.fill(base, 0, 2 * g);
  // One copy that starts in the first chunk and ends in the second.
  auto const data = pattern(g, 1);
  b.copy(at(base, g / 2), data.data(), data.size());
  auto const back = read_back(b, base, 2 * g);
  EXPECT_TRUE(std::all_of(back.begin(), back.begin() + g / 2, [](auto v) { return v == 0; }));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + g / 2))
      << "the bytes written across the chunk boundary did not come back";
  EXPECT_TRUE(std::all_of(back.begin() + g / 2 + g, back.end(), [](auto v) { return v == 0; }));

  // The third granule can be mapped later, right after the others.
  physical_handle const third = vmm.create(g);
  vmm.map(at(base, 2 * g), g, third);
  auto const tail = pattern(2 * g, 2);
  b.copy(at(base, g), tail.data(), tail.size());
  EXPECT_EQ(read_back(b, at(base, g), 2 * g), tail);
}

TEST(cuda_vmm, unmap_and_remap_keep_each_chunk_s_data) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  vmm_scope vmm(b);
  void* base = vmm.reserve(2 * g);
  physical_handle const a = vmm.create(g);
  physical_handle const c = vmm.create(g);
  auto const data_a = pattern(g, 3);
  auto const data_c = pattern(g, 4);

  vmm.map(base, g, a);
  b.copy(base, data_a.data(), g);
  vmm.unmap(base, g);

  // A different chunk at the same address shows its own bytes.
  vmm.map(base, g, c);
  b.copy(base, data_c.data(), g);
  EXPECT_EQ(read_back(b, base, g), data_c);
  vmm.unmap(base, g);

  // The first chunk kept its bytes while unmapped, and shows them at another address.
  vmm.map(at(base, g), g, a);
  EXPECT_EQ(read_back(b, at(base, g), g), data_a);

  // A chunk mapped twice is one memory: a write through one address is seen through the other.
  vmm.map(base, g, a);
  b.fill(base, 0x5a, 4096);
  auto const seen = read_back(b, at(base, g), 4096);
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](auto v) { return v == 0x5a; }));
}

TEST(cuda_vmm, physical_memory_counts_against_the_host_device_capacity) {
  auto small = gpumem::make_host_backend({/*capacity=*/5 * MiB});
  std::size_t const g = small->vmm_granularity();
  ASSERT_EQ(g, 2 * MiB);
  gpumem::memory_info const before = small->get_memory_info();
  {
    vmm_scope vmm(*small);
    physical_handle const first = vmm.create(g);
    vmm.create(g);
    EXPECT_EQ(small->get_memory_info().free + 2 * g, before.free);
    try {
      vmm.create(g);
      ADD_FAILURE() << "a third 2 MiB chunk fitted into a 5 MiB device that holds two";
    } catch (gpumem::out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), g);
      EXPECT_EQ(e.current_bytes(), 2 * g);
      EXPECT_NE(e.allocator().find("host backend"), std::string::npos) << e.allocator();
      EXPECT_NE(std::string(e.what()).find("create_physical"), std::string::npos) << e.what();
    }
    // Ordinary allocations share the capacity with the chunks.
    EXPECT_THROW((void)small->allocate(2 * MiB), gpumem::out_of_memory);
    vmm.release(first);
    physical_handle const again = vmm.create(g);
    EXPECT_NE(again, first) << "handles are never reused";
  }
  EXPECT_EQ(small->get_memory_info().free, before.free);
}

TEST(cuda_vmm, a_chunk_larger_than_the_device_is_out_of_memory) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  std::size_t const too_much = (b.get_memory_info().total + g) / g * g;
  try {
    physical_handle const h = b.create_physical(too_much);
    b.release_physical(h);
    ADD_FAILURE() << "created a chunk of " << too_much << " bytes";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), too_much);
    if (gpumem::test::on_cuda()) {
      EXPECT_NE(std::string(e.what()).find("cuMemCreate"), std::string::npos) << e.what();
    }
  }
  // Nothing was left behind: a small chunk still works.
  vmm_scope vmm(b);
  EXPECT_NE(vmm.create(g), physical_handle::none);
}

// A range of addresses whose over-reservation would wrap (the host backend reserves one granule
// more to align it) is out of memory, as the driver reports a range it cannot find.
TEST(cuda_vmm, a_range_that_would_wrap_is_out_of_memory) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  for (std::size_t const bytes : {~std::size_t{0} / g * g, (std::size_t{1} << 63)}) {
    try {
      void* base = b.reserve_address_range(bytes);
      b.release_address_range(base, bytes);
      ADD_FAILURE() << "reserved " << bytes << " bytes of addresses";
    } catch (gpumem::out_of_memory const& e) {
      EXPECT_EQ(e.requested_bytes(), bytes) << e.what();
    }
  }
}

TEST(cuda_vmm, sizes_must_be_non_zero_multiples_of_the_granularity) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  std::size_t const odd = g + 4096;
  std::string const odd_text = std::to_string(odd);
  expect_logic_error([&] { b.reserve_address_range(0); }, "0 bytes", "reserve 0");
  expect_logic_error([&] { b.reserve_address_range(odd); }, odd_text, "reserve g + 4096");
  expect_logic_error([&] { b.create_physical(0); }, "0 bytes", "create 0");
  expect_logic_error([&] { b.create_physical(g / 2); }, std::to_string(g / 2), "create g / 2");

  vmm_scope vmm(b);
  void* base = vmm.reserve(4 * g);
  physical_handle const h = vmm.create(g);
  expect_logic_error([&] { b.map_physical(base, 0, h); }, "0 bytes", "map 0 bytes");
  expect_logic_error([&] { b.map_physical(base, odd, h); }, odd_text, "map g + 4096");
  expect_logic_error([&] { b.map_physical(base, 2 * g, h); }, std::to_string(2 * g),
                     "map more than the chunk");
  expect_logic_error([&] { b.unmap(base, odd); }, odd_text, "unmap g + 4096");
  expect_logic_error([&] { b.release_address_range(base, odd); }, odd_text, "release g + 4096");
}

TEST(cuda_vmm, mapping_needs_an_aligned_address_inside_a_reservation_where_nothing_is_mapped) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  vmm_scope vmm(b);
  void* base = vmm.reserve(2 * g);
  physical_handle const one = vmm.create(g);
  physical_handle const two = vmm.create(2 * g);

  void* const unaligned = at(base, 4096);
  expect_logic_error([&] { b.map_physical(unaligned, g, one); }, address_text(unaligned),
                     "unaligned address");
  void* const past_end = at(base, 2 * g);
  expect_logic_error([&] { b.map_physical(past_end, g, one); }, address_text(past_end),
                     "address past the reservation");
  void* const straddling = at(base, g);
  expect_logic_error([&] { b.map_physical(straddling, 2 * g, two); }, address_text(straddling),
                     "mapping that runs past the reservation");
  std::vector<std::uint8_t> host(4 * g);
  void* const host_address =
      reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(host.data()) + g - 1) / g * g);
  expect_logic_error([&] { b.map_physical(host_address, g, one); }, address_text(host_address),
                     "address outside every reservation");

  vmm.map(base, g, one);
  expect_logic_error([&] { b.map_physical(base, 2 * g, two); }, address_text(base),
                     "mapping over a mapping");
  physical_handle const three = vmm.create(g);
  expect_logic_error([&] { b.map_physical(base, g, three); }, address_text(base),
                     "the same address twice");
  // The failed attempts changed nothing: the rest of the range still maps.
  vmm.map(at(base, g), g, three);
}

TEST(cuda_vmm, unmap_removes_exactly_one_mapping) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  vmm_scope vmm(b);
  void* base = vmm.reserve(4 * g);
  physical_handle const small = vmm.create(g);
  physical_handle const large = vmm.create(2 * g);
  vmm.map(base, g, small);
  vmm.map(at(base, g), 2 * g, large);

  void* const empty = at(base, 3 * g);
  expect_logic_error([&] { b.unmap(empty, g); }, address_text(empty), "unmap of nothing");
  void* const inside = at(base, 2 * g);
  expect_logic_error([&] { b.unmap(inside, g); }, address_text(inside), "unmap of half a mapping");
  expect_logic_error([&] { b.unmap(at(base, g), g); }, std::to_string(2 * g),
                     "unmap with the wrong size");
  expect_logic_error([&] { b.unmap(base, 3 * g); }, std::to_string(3 * g),
                     "unmap of two mappings at once");
  std::vector<std::uint8_t> host(2 * g);
  expect_logic_error([&] { b.unmap(host.data(), g); }, address_text(host.data()),
                     "unmap outside every reservation");

  vmm.unmap(base, g);
  expect_logic_error([&] { b.unmap(base, g); }, address_text(base), "unmap twice");
}

TEST(cuda_vmm, releasing_what_is_still_mapped_or_unknown_is_an_error) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  vmm_scope vmm(b);
  void* base = vmm.reserve(2 * g);
  physical_handle const h = vmm.create(g);
  vmm.map(at(base, g), g, h);

  expect_logic_error([&] { b.release_address_range(base, 2 * g); }, address_text(at(base, g)),
                     "release of a range with a mapping");
  expect_logic_error([&] { b.release_physical(h); }, handle_number(h), "release of a mapped chunk");
  expect_logic_error([&] { b.release_address_range(at(base, g), g); }, address_text(at(base, g)),
                     "release of a range that is not a reservation's base");
  expect_logic_error([&] { b.release_address_range(base, 4 * g); }, std::to_string(4 * g),
                     "release with the wrong size");

  physical_handle const unknown{static_cast<std::uint64_t>(h) + 1000};
  expect_logic_error([&] { b.release_physical(unknown); }, handle_number(unknown),
                     "release of an unknown handle");
  expect_logic_error([&] { b.release_physical(physical_handle::none); }, "physical handle 0",
                     "release of the null handle");
  expect_logic_error([&] { b.map_physical(base, g, unknown); }, handle_number(unknown),
                     "map of an unknown handle");

  // The refused calls changed nothing: the mapping still holds data, and teardown in order works.
  auto const data = pattern(g, 5);
  b.copy(at(base, g), data.data(), g);
  EXPECT_EQ(read_back(b, at(base, g), g), data);
  vmm.unmap(at(base, g), g);
  vmm.release(h);
  expect_logic_error([&] { b.release_physical(h); }, handle_number(h), "release twice");
  vmm.release_range(base, 2 * g);
  expect_logic_error([&] { b.release_address_range(base, 2 * g); }, address_text(base),
                     "release of a range twice");
}

TEST(cuda_vmm, nothing_leaks_on_the_host_device) {
  auto host = gpumem::make_host_backend({/*capacity=*/64 * MiB});
  std::size_t const g = host->vmm_granularity();
  gpumem::memory_info const before = host->get_memory_info();
  for (int round = 0; round < 3; ++round) {
    void* base = host->reserve_address_range(8 * g);
    std::vector<physical_handle> chunks;
    for (std::size_t i = 0; i < 4; ++i) {
      chunks.push_back(host->create_physical(2 * g));
      host->map_physical(at(base, 2 * g * i), 2 * g, chunks.back());
    }
    EXPECT_EQ(host->get_memory_info().free + 8 * g, before.free) << "round " << round;
    auto const data = pattern(8 * g, static_cast<unsigned>(round));
    host->copy(base, data.data(), data.size());
    EXPECT_EQ(read_back(*host, base, 8 * g), data);
    for (std::size_t i = 0; i < 4; ++i) {
      host->unmap(at(base, 2 * g * i), 2 * g);
      host->release_physical(chunks[i]);
    }
    host->release_address_range(base, 8 * g);
    EXPECT_EQ(host->get_memory_info().free, before.free) << "round " << round;
  }
}

TEST(cuda_vmm, threads_grow_and_shrink_one_range_at_once) {
  auto& b = backend();
  GPUMEM_SKIP_UNLESS_VMM(b);
  std::size_t const g = b.vmm_granularity();
  constexpr unsigned threads = 4;
  constexpr int rounds = 8;
  int const device = b.current_device();
  vmm_scope vmm(b);
  void* base = vmm.reserve(threads * g);
  std::vector<std::string> failures(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        b.set_current_device(device);
        void* slot = at(base, t * g);
        for (int r = 0; r < rounds; ++r) {
          physical_handle const h = b.create_physical(g);
          b.map_physical(slot, g, h);
          auto const data = pattern(g, t * 100 + static_cast<unsigned>(r));
          b.copy(slot, data.data(), g);
          bool const same = read_back(b, slot, g) == data;
          b.unmap(slot, g);
          b.release_physical(h);
          if (!same) throw std::runtime_error("round " + std::to_string(r) + ": data differs");
        }
      } catch (std::exception const& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& w : workers)
    w.join();
  for (unsigned t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t;
}
