// Pinned, mapped and registered host memory through the primitive layer. Runs on both backends;
// where CUDA's unified addressing makes the backends differ, the test says which and why.
#include "backend_fixtures.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

using gpumem::backend;
using gpumem::KiB;
using gpumem::test::device_buffer;
using gpumem::test::pinned_buffer;

namespace {

// The host's page size (4 KiB on x86-64; 64 KiB on some ARM machines).
std::size_t const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// Page-aligned ordinary heap memory, as a user would hand to register_host.
struct heap_pages {
  explicit heap_pages(std::size_t n) : bytes(n), ptr(std::aligned_alloc(page, n)) {}
  ~heap_pages() { std::free(ptr); }
  heap_pages(heap_pages const&) = delete;
  heap_pages& operator=(heap_pages const&) = delete;
  std::size_t bytes;
  void* ptr;
};

}  // namespace

TEST(cuda_host_memory, pinned_memory_round_trips_through_the_device) {
  auto& b = backend();
  std::size_t const n = 96 * KiB;
  for (bool write_combined : {false, true}) {
    pinned_buffer src(n, {/*mapped=*/false, /*portable=*/true, write_combined});
    pinned_buffer dst(n);
    ASSERT_NE(src.get(), nullptr);
    ASSERT_NE(src.get(), dst.get());
    for (std::size_t i = 0; i < n; ++i)
      src.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(i * 7 + 3);
    device_buffer d(n);
    b.copy(d.get(), src.get(), n);
    b.copy(dst.get(), d.get(), n);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(dst.as<std::uint8_t>()[i], static_cast<std::uint8_t>(i * 7 + 3)) << i;
  }
}

TEST(cuda_host_memory, zero_byte_pinned_allocation_is_a_distinct_pointer) {
  pinned_buffer a(0), c(0);
  EXPECT_NE(a.get(), nullptr);
  EXPECT_NE(a.get(), c.get());
}

TEST(cuda_host_memory, mapped_pinned_memory_has_a_device_pointer) {
  auto& b = backend();
  pinned_buffer mapped(8 * KiB, {/*mapped=*/true, false, false});
  void* device_view = b.mapped_device_pointer(mapped.get());
  ASSERT_NE(device_view, nullptr);
  // Unified addressing (every 64-bit CUDA process; the host backend by construction): the device
  // sees cudaHostAlloc'd memory at its host address.
  EXPECT_EQ(device_view, mapped.get());
  // An interior pointer maps to the same offset.
  EXPECT_EQ(b.mapped_device_pointer(mapped.as<std::uint8_t>() + 100),
            static_cast<std::uint8_t*>(device_view) + 100);
  // A device-side copy through the device view lands in the host memory.
  device_buffer d(8 * KiB);
  b.fill(d.get(), 0x3c, 8 * KiB);
  b.copy(device_view, d.get(), 8 * KiB);
  EXPECT_EQ(mapped.as<std::uint8_t>()[0], 0x3c);
  EXPECT_EQ(mapped.as<std::uint8_t>()[8 * KiB - 1], 0x3c);
}

TEST(cuda_host_memory, pinned_memory_without_the_mapped_flag) {
  auto& b = backend();
  pinned_buffer plain(4 * KiB);
  if (gpumem::test::on_cuda()) {
    // CUDA maps every cudaHostAlloc allocation into the unified address space whatever the flags,
    // at the host address (runtime API, "Automatic Mapping of Host Allocated Host Memory").
    EXPECT_EQ(b.mapped_device_pointer(plain.get()), plain.get());
  } else {
    // The host backend keeps the flag and enforces the interface's contract literally.
    EXPECT_THROW((void)b.mapped_device_pointer(plain.get()), gpumem::cuda_error);
  }
}

TEST(cuda_host_memory, register_and_unregister_host_memory) {
  auto& b = backend();
  heap_pages pages(64 * KiB);
  ASSERT_NE(pages.ptr, nullptr);
  b.register_host(pages.ptr, pages.bytes, /*mapped=*/true, /*portable=*/false);
  void* device_view = b.mapped_device_pointer(pages.ptr);
  EXPECT_NE(device_view, nullptr);
  // Registered memory is a valid target of device copies through its device view.
  device_buffer d(pages.bytes);
  b.fill(d.get(), 0x77, pages.bytes);
  b.copy(device_view, d.get(), pages.bytes);
  EXPECT_EQ(static_cast<std::uint8_t*>(pages.ptr)[0], 0x77);
  EXPECT_EQ(static_cast<std::uint8_t*>(pages.ptr)[pages.bytes - 1], 0x77);

  try {
    b.register_host(pages.ptr, pages.bytes, true, false);
    ADD_FAILURE() << "registering the same memory twice succeeded";
  } catch (gpumem::cuda_error const& e) {
    EXPECT_EQ(e.code(), 712) << e.what();  // cudaErrorHostMemoryAlreadyRegistered
  }
  b.unregister_host(pages.ptr);
  try {
    b.unregister_host(pages.ptr);
    ADD_FAILURE() << "unregistering memory that is no longer registered succeeded";
  } catch (gpumem::cuda_error const& e) {
    EXPECT_EQ(e.code(), 713) << e.what();  // cudaErrorHostMemoryNotRegistered
  }
  // Registration can be taken again after it was given back.
  b.register_host(pages.ptr, pages.bytes, false, true);
  b.unregister_host(pages.ptr);
}

namespace {
// The cudaError_t code of what `register_host` threw, or 0 when it succeeded.
int register_code(void* ptr, std::size_t bytes) {
  try {
    backend().register_host(ptr, bytes, false, false);
    return 0;
  } catch (gpumem::cuda_error const& e) {
    return e.code();
  }
}
}  // namespace

// A range that overlaps a registered one is refused wherever it starts (the host backend used to
// check only whether the new range STARTS inside one, so a range that began before and reached
// into it was accepted there and refused on a GPU); ranges that only share a page are both
// registered. Device memory is not host memory to register. The codes are CUDA's on an H100
// (driver 580).
TEST(cuda_host_memory, a_registration_overlapping_another_is_refused_wherever_it_starts) {
  auto& b = backend();
  heap_pages pages(4 * page);
  auto* const p = static_cast<std::uint8_t*>(pages.ptr);
  b.register_host(p + page, page, false, false);
  EXPECT_EQ(register_code(p, 3 * page), 712);         // starts before, reaches in
  EXPECT_EQ(register_code(p, page + 1), 712);         // one byte into it
  EXPECT_EQ(register_code(p + page + 100, 10), 712);  // inside it
  EXPECT_EQ(register_code(p + 2 * page, page), 0);    // the next page: not overlapping
  b.unregister_host(p + 2 * page);
  b.unregister_host(p + page);

  b.register_host(p + 100, page - 200, false, false);
  EXPECT_EQ(register_code(p + page - 100, 50), 0);  // shares the first page, not a byte
  EXPECT_EQ(register_code(p + 50, 100), 712);       // reaches into it from before
  b.unregister_host(p + page - 100);
  b.unregister_host(p + 100);

  device_buffer d(4 * KiB);
  EXPECT_EQ(register_code(d.get(), 4 * KiB), 1);  // cudaErrorInvalidValue
}

// Only memory the process has mapped can be registered: a range that runs past the end of a
// mapping, or one far larger than any memory, is refused (the host backend used to take both and
// then computed addresses past the end of the address space when asked about them).
TEST(cuda_host_memory, a_range_past_the_mapped_memory_is_refused) {
  void* const map =
      ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* const p = static_cast<std::uint8_t*>(map);
  ASSERT_EQ(::munmap(p + page, page), 0);  // the second page is no longer mapped
  EXPECT_NE(register_code(p, 2 * page), 0);
  EXPECT_NE(register_code(p, std::size_t{1} << 44), 0);
  EXPECT_NE(register_code(p, ~std::size_t{0} - reinterpret_cast<std::uintptr_t>(p) - 10), 0);
  EXPECT_EQ(register_code(p, page), 0);  // the page still mapped
  backend().unregister_host(p);
  ::munmap(p, page);
}

TEST(cuda_host_memory, ordinary_heap_memory_has_no_device_pointer) {
  auto& b = backend();
  heap_pages pages(4 * KiB);
  EXPECT_THROW((void)b.mapped_device_pointer(pages.ptr), gpumem::cuda_error);
}
