// gpumem::launch on both backends, and device access to mapped, managed and pageable-free memory
// on the cuda backend. Compiled by nvcc in CUDA builds and as C++ in host-only builds, so the
// functors are written once with GPUMEM_HD (named structs: nvcc forbids extended lambdas inside
// gtest's private TestBody).
#include "backend_fixtures.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using gpumem::backend;
using gpumem::test::device_buffer;
using gpumem::test::pinned_buffer;
using gpumem::test::scoped_stream;

namespace {

// Every thread writes who it is: block, thread and the launch shape it saw.
struct record_thread {
  std::uint64_t* out;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    out[t.global()] = (std::uint64_t{t.block} << 40) | (std::uint64_t{t.thread} << 20) |
                      (std::uint64_t{t.grid_dim} << 10) | std::uint64_t{t.block_dim};
  }
};

struct write_squares {
  std::uint32_t* out;
  std::size_t n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    for (auto i = t.global(); i < n; i += t.total())
      out[i] = static_cast<std::uint32_t>(i * i);
  }
};

struct double_plus_one {
  std::uint32_t* data;
  std::size_t n;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    for (auto i = t.global(); i < n; i += t.total())
      data[i] = data[i] * 2 + 1;
  }
};

}  // namespace

TEST(cuda_launch, every_thread_of_a_grid_runs_once_with_its_indices) {
  auto& b = backend();
  unsigned const grid = 7, block = 96;
  std::size_t const n = std::size_t{grid} * block;
  device_buffer out(n * sizeof(std::uint64_t));
  b.fill(out.get(), 0xff, out.size());
  scoped_stream stream;
  gpumem::launch({grid, block, stream.get()}, record_thread{out.as<std::uint64_t>()});
  b.synchronize_stream(stream.get());
  std::vector<std::uint64_t> seen(n);
  b.copy(seen.data(), out.get(), out.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t const expected = (std::uint64_t{i / block} << 40) |
                                   (std::uint64_t{i % block} << 20) | (std::uint64_t{grid} << 10) |
                                   std::uint64_t{block};
    ASSERT_EQ(seen[i], expected) << "global thread " << i;
  }
}

TEST(cuda_launch, a_grid_stride_loop_covers_more_elements_than_threads) {
  auto& b = backend();
  std::size_t const n = 10007;
  device_buffer out(n * sizeof(std::uint32_t));
  gpumem::launch({4, 64, nullptr}, write_squares{out.as<std::uint32_t>(), n});
  b.synchronize();
  std::vector<std::uint32_t> seen(n);
  b.copy(seen.data(), out.get(), out.size());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[i], static_cast<std::uint32_t>(i * i)) << i;
}

TEST(cuda_launch, launches_on_one_stream_run_in_order) {
  auto& b = backend();
  std::size_t const n = 4096;
  device_buffer data(n * sizeof(std::uint32_t));
  b.fill(data.get(), 0, data.size());
  scoped_stream stream;
  for (int k = 0; k < 3; ++k)  // 0 -> 1 -> 3 -> 7: only in order gives 7
    gpumem::launch({8, 32, stream.get()}, double_plus_one{data.as<std::uint32_t>(), n});
  b.synchronize_stream(stream.get());
  std::vector<std::uint32_t> seen(n);
  b.copy(seen.data(), data.get(), data.size());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[i], 7u) << i;
}

TEST(cuda_launch, an_empty_grid_does_nothing_and_a_zero_block_is_refused) {
  device_buffer out(64);
  EXPECT_NO_THROW(gpumem::launch({0, 32, nullptr}, record_thread{out.as<std::uint64_t>()}));
  EXPECT_THROW(gpumem::launch({1, 0, nullptr}, record_thread{out.as<std::uint64_t>()}),
               gpumem::logic_error);
}

TEST(cuda_launch, a_bounded_launch_runs_every_thread_and_refuses_larger_blocks) {
  auto& b = backend();
  unsigned const grid = 5, block = 128;
  std::size_t const n = std::size_t{grid} * block;
  device_buffer out(n * sizeof(std::uint64_t));
  gpumem::launch_bounded<128, 4>({grid, block, nullptr}, record_thread{out.as<std::uint64_t>()});
  b.synchronize();
  std::vector<std::uint64_t> seen(n);
  b.copy(seen.data(), out.get(), out.size());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[i] >> 20, ((i / block) << 20) | (i % block)) << "global thread " << i;
  EXPECT_THROW(
      (gpumem::launch_bounded<128, 4>({1, 129, nullptr}, record_thread{out.as<std::uint64_t>()})),
      gpumem::logic_error);
}

TEST(cuda_launch, a_launch_after_out_of_memory_is_not_blamed_for_it) {
  auto& b = backend();
  std::size_t const too_much = b.get_memory_info().total + gpumem::GiB;
  EXPECT_THROW((void)b.allocate(too_much), gpumem::out_of_memory);
  std::size_t const n = 256;
  device_buffer out(n * sizeof(std::uint32_t));
  // The failed cudaMalloc must not linger as the thread's last error for the launch check.
#if GPUMEM_HAS_CUDA
  if (gpumem::test::on_cuda()) {
    EXPECT_NO_THROW(gpumem::detail::check_last_launch("after out of memory"));
  }
#endif
  EXPECT_NO_THROW(gpumem::launch({2, 128, nullptr}, write_squares{out.as<std::uint32_t>(), n}));
  b.synchronize();
  std::vector<std::uint32_t> seen(n);
  b.copy(seen.data(), out.get(), out.size());
  EXPECT_EQ(seen[255], 255u * 255u);
}

TEST(cuda_launch, an_impossible_launch_is_a_cuda_error) {
  device_buffer out(64);
  // No CUDA device runs 4096 threads in one block: the launch itself fails, on the host backend too
  // (which used to run it).
  try {
    gpumem::launch({1, 4096, nullptr}, record_thread{out.as<std::uint64_t>()});
    ADD_FAILURE() << "a launch of 4096 threads per block was accepted";
  } catch (gpumem::cuda_error const& e) {
    // CUDA 13 reports cudaErrorInvalidValue (1) on an H100; older runtimes said
    // cudaErrorInvalidConfiguration (9). Either way it is a launch error, named as such.
    EXPECT_TRUE(e.code() == 1 || e.code() == 9) << e.what();
    EXPECT_NE(std::string(e.what()).find("launch"), std::string::npos) << e.what();
  }
  // Nor 2^31 blocks (the host backend used to try to run them all).
  try {
    gpumem::launch({2147483648u, 1, nullptr}, record_thread{out.as<std::uint64_t>()});
    ADD_FAILURE() << "a launch of 2^31 blocks was accepted";
  } catch (gpumem::cuda_error const& e) {
    EXPECT_TRUE(e.code() == 1 || e.code() == 9) << e.what();
  }
  // The failure is reported once: the next launch is clean.
  EXPECT_NO_THROW(gpumem::launch({1, 1, nullptr}, record_thread{out.as<std::uint64_t>()}));
  backend().synchronize();
}

// launch() checks its kernel's status through these in every translation unit nvcc compiles,
// against a host-only build too: there they must exist (a .cu consumer failed to link) and still
// report a failed status.
TEST(cuda_launch, the_launch_checks_exist_in_every_build_and_report_a_failed_status) {
  EXPECT_NO_THROW(gpumem::detail::check_launch_status(0, "launch"));
  try {
    gpumem::detail::check_launch_status(9, "launch");
    ADD_FAILURE() << "check_launch_status(9) did not throw";
  } catch (gpumem::cuda_error const& e) {
    EXPECT_EQ(e.code(), 9);
    EXPECT_EQ(e.call(), "launch");
  }
#if !GPUMEM_HAS_CUDA
  EXPECT_NO_THROW(gpumem::detail::check_last_launch("launch"));  // no runtime, no failed launch
#endif
}

TEST(cuda_launch, a_kernel_writes_mapped_host_memory) {
  GPUMEM_SKIP_UNLESS_CUDA();
  auto& b = backend();
  std::size_t const n = 5000;
  pinned_buffer host(n * sizeof(std::uint32_t), {/*mapped=*/true, false, false});
  std::fill_n(host.as<std::uint32_t>(), n, 0u);
  auto* device_view = static_cast<std::uint32_t*>(b.mapped_device_pointer(host.get()));
  scoped_stream stream;
  gpumem::launch({5, 128, stream.get()}, write_squares{device_view, n});
  b.synchronize_stream(stream.get());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(host.as<std::uint32_t>()[i], static_cast<std::uint32_t>(i * i)) << i;
}

TEST(cuda_launch, managed_memory_written_by_host_then_kernel_then_read_by_host) {
  GPUMEM_SKIP_UNLESS_CUDA();
  auto& b = backend();
  std::size_t const n = 1 << 16;
  auto* data = static_cast<std::uint32_t*>(b.allocate_managed(n * sizeof(std::uint32_t), true));
  ASSERT_NE(data, nullptr);
  for (std::size_t i = 0; i < n; ++i)
    data[i] = static_cast<std::uint32_t>(i);
  gpumem::launch({16, 256, nullptr}, double_plus_one{data, n});
  b.synchronize();
  bool all_right = true;
  for (std::size_t i = 0; i < n && all_right; ++i) {
    all_right = data[i] == static_cast<std::uint32_t>(2 * i + 1);
    EXPECT_TRUE(all_right) << "element " << i << " is " << data[i];
  }
  b.deallocate_managed(data);
}

TEST(cuda_device, device_count_and_identity_are_consistent) {
  auto& b = backend();
  int const count = b.device_count();
  ASSERT_GE(count, 1);
  int const current = b.current_device();
  ASSERT_GE(current, 0);
  ASSERT_LT(current, count);
  gpumem::device_identity const id = b.identity(current);
  EXPECT_EQ(id.ordinal, current);
  EXPECT_FALSE(id.name.empty());
  EXPECT_EQ(id, b.identity(current)) << "identity is stable";
  bool const uuid_is_zero =
      std::all_of(id.uuid.begin(), id.uuid.end(), [](std::uint8_t x) { return x == 0; });
  EXPECT_FALSE(uuid_is_zero);
  for (int other = 0; other < count; ++other) {
    if (other != current) {
      EXPECT_NE(id, b.identity(other)) << "devices " << current << ", " << other;
    }
  }
  EXPECT_THROW((void)b.identity(count), gpumem::cuda_error);
  EXPECT_THROW(b.set_current_device(count), gpumem::cuda_error);
  b.set_current_device(current);
  EXPECT_EQ(b.current_device(), current);

  std::string const description = b.description();
  if (gpumem::test::on_cuda()) {
    EXPECT_EQ(description.rfind("cuda: " + id.name + " (sm_", 0), 0u) << description;
    EXPECT_NE(description.find(" GiB)"), std::string::npos) << description;
  } else {
    EXPECT_EQ(description.rfind("host: ", 0), 0u) << description;
  }
}
