// DLPack export and import: device types, strides in elements, ownership, round trips, errors.
#include "array_test_support.hpp"

#include <gpumem/array/dlpack_interop.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace gpumem {
namespace {

dlpack::DLDeviceType expected(dlpack::DLDeviceType on_cuda) {
  return test::on_cuda_backend() ? on_cuda : dlpack::kDLCPU;
}

TEST(dlpack, export_describes_the_array) {
  std::vector<float> host(24);
  std::iota(host.begin(), host.end(), 0.f);
  auto d = to_device(host, {4, 6});
  auto part = d.slice({slice{1, 4}, slice{0, 6, 2}});
  dlpack::DLManagedTensor* t = to_dlpack(part);
  EXPECT_EQ(d.use_count(), 3);  // d, part, the tensor
  EXPECT_EQ(t->dl_tensor.ndim, 2);
  EXPECT_EQ(t->dl_tensor.shape[0], 3);
  EXPECT_EQ(t->dl_tensor.shape[1], 3);
  EXPECT_EQ(t->dl_tensor.strides[0], 6);  // elements, not bytes
  EXPECT_EQ(t->dl_tensor.strides[1], 2);
  EXPECT_EQ(t->dl_tensor.dtype.code, dlpack::kDLFloat);
  EXPECT_EQ(t->dl_tensor.dtype.bits, 32);
  EXPECT_EQ(t->dl_tensor.dtype.lanes, 1);
  EXPECT_EQ(t->dl_tensor.device.device_type, expected(dlpack::kDLCUDA));
  EXPECT_EQ(t->dl_tensor.device.device_id,
            test::on_cuda_backend() ? current_context().device() : 0);
  EXPECT_EQ(t->dl_tensor.data, part.data());
  t->deleter(t);
  EXPECT_EQ(d.use_count(), 2);
}

TEST(dlpack, device_types_of_host_arrays) {
  pinned_array<int> p({4});
  mapped_array<int> m({4});
  managed_array<int> g({4});
  auto* tp = to_dlpack(p);
  auto* tm = to_dlpack_versioned(m);
  auto* tg = to_dlpack(g);
  EXPECT_EQ(tp->dl_tensor.device.device_type, expected(dlpack::kDLCUDAHost));
  EXPECT_EQ(tm->dl_tensor.device.device_type, expected(dlpack::kDLCUDAHost));
  EXPECT_EQ(tm->version.major, 1u);
  EXPECT_EQ(tm->flags, 0u);
  EXPECT_EQ(tg->dl_tensor.device.device_type, expected(dlpack::kDLCUDAManaged));
  tp->deleter(tp);
  tm->deleter(tm);
  tg->deleter(tg);
}

TEST(dlpack, round_trip_keeps_values_and_ownership) {
  std::vector<std::int64_t> host(30);
  std::iota(host.begin(), host.end(), 100);
  auto d = to_device(host, {5, 6}, array_order::fortran);
  auto reversed = d.slice({slice{0, 5, -1}});
  auto expected_values = reversed.copy_to_host();
  auto back = from_dlpack<std::int64_t>(to_dlpack(reversed));
  EXPECT_EQ(back.shape(), reversed.shape());
  EXPECT_EQ(back.strides(), reversed.strides());
  EXPECT_EQ(back.copy_to_host(), expected_values);
  EXPECT_EQ(d.use_count(), 3);  // d, reversed, the tensor held by `back`
  back = device_array<std::int64_t>();
  EXPECT_EQ(d.use_count(), 2);  // the deleter ran

  auto v = from_dlpack<std::int64_t>(to_dlpack_versioned(d));
  EXPECT_EQ(v.copy_to_host(), d.copy_to_host());
}

TEST(dlpack, import_rejects_what_it_cannot_use) {
  auto d = to_device(std::vector<float>{1, 2, 3});
  dlpack::DLManagedTensor* t = to_dlpack(d);
  test::expect_logic_error([&] { from_dlpack<int>(t); }, "does not match the element type");
  auto saved = t->dl_tensor.device;
  t->dl_tensor.device.device_type = dlpack::kDLCUDAHost;
  test::expect_logic_error([&] { from_dlpack<float>(t); }, "kDLCUDAHost");
  t->dl_tensor.device = saved;
  t->dl_tensor.shape[0] = -2;
  test::expect_logic_error([&] { from_dlpack<float>(t); }, "shape[0] = -2 is negative");
  t->dl_tensor.shape[0] = 3;
  // A byte offset that wraps the address space (it used to move the data pointer backwards).
  t->dl_tensor.byte_offset = ~std::uint64_t{0} - 3;
  test::expect_logic_error([&] { from_dlpack<float>(t); }, "wraps the address space");
  t->dl_tensor.byte_offset = 0;
  EXPECT_EQ(d.use_count(), 2) << "a failed import must leave the tensor with the caller";
  auto ok = from_dlpack<float>(t);
  EXPECT_EQ(ok.copy_to_host(), (std::vector<float>{1, 2, 3}));
}

// A null data pointer with a byte offset used to be imported as an array at address byte_offset
// (null + offset passed the null check of a non-empty array); reading it crashed.
TEST(dlpack, a_null_data_pointer_is_refused_whatever_the_byte_offset) {
  std::int64_t shape[1] = {4};
  dlpack::DLManagedTensor t{};
  t.dl_tensor.data = nullptr;
  t.dl_tensor.device = {test::on_cuda_backend() ? dlpack::kDLCUDA : dlpack::kDLCPU,
                        test::on_cuda_backend() ? current_context().device() : 0};
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype = dlpack_dtype<float>();
  t.dl_tensor.shape = shape;
  t.dl_tensor.byte_offset = 64;
  test::expect_logic_error([&] { from_dlpack<float>(&t); },
                           "from_dlpack: byte_offset 64 from a null data pointer");
  t.dl_tensor.byte_offset = 0;
  test::expect_logic_error([&] { from_dlpack<float>(&t); }, "null pointer for a non-empty array");
  shape[0] = 0;  // an empty tensor may have no data
  EXPECT_EQ(from_dlpack<float>(&t).size(), 0u);
}

TEST(dlpack, read_only_tensors_are_refused_and_stay_with_the_caller) {
  auto d = to_device(std::vector<float>{1, 2, 3});
  dlpack::DLManagedTensorVersioned* t = to_dlpack_versioned(d);
  t->flags = dlpack::flag_read_only | dlpack::flag_is_copied;
  test::expect_logic_error(
      [&] { from_dlpack<float>(t); },
      "the tensor is read-only (flags 3 include DLPACK_FLAG_BITMASK_READ_ONLY)");
  EXPECT_EQ(d.use_count(), 2) << "a refused import must leave the tensor with the caller";
  t->flags = dlpack::flag_is_copied;  // writable: accepted
  auto ok = from_dlpack<float>(t);
  EXPECT_EQ(ok.copy_to_host(), (std::vector<float>{1, 2, 3}));
  ok = device_array<float>();
  EXPECT_EQ(d.use_count(), 1);  // the deleter ran once the import owned the tensor
}

// kDLFloat with `bits` means the IEEE 754 format of that width. x86's long double is the 80-bit
// extended format in 16 bytes: it used to be exported as kDLFloat/128 (binary128), which a
// consumer would misread.
TEST(dlpack, only_ieee_interchange_floats_have_a_dtype) {
  static_assert(has_dlpack_dtype_v<float> && has_dlpack_dtype_v<double>);
  static_assert(has_dlpack_dtype_v<std::int8_t> && has_dlpack_dtype_v<bool>);
  static_assert(has_dlpack_dtype_v<std::complex<double>>);
  static_assert(!has_dlpack_dtype_v<std::complex<long double>>);
  using limits = std::numeric_limits<long double>;
  bool const binary128 = limits::is_iec559 && sizeof(long double) == 16 && limits::digits == 113;
  bool const binary64 = limits::is_iec559 && sizeof(long double) == 8 && limits::digits == 53;
  EXPECT_EQ(has_dlpack_dtype_v<long double>, binary128 || binary64);
#if defined(__x86_64__) || defined(__i386__)
  EXPECT_FALSE(has_dlpack_dtype_v<long double>) << "x87 extended precision is not binary128";
#endif
}

TEST(dlpack, zero_size_and_scalar) {
  device_array<double> empty({0, 4});
  auto e = from_dlpack<double>(to_dlpack(empty));
  EXPECT_EQ(e.size(), 0u);
  auto scalar = to_device(std::vector<int>{42}, shape_type{});
  auto s = from_dlpack<int>(to_dlpack(scalar));
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.copy_to_host(), (std::vector<int>{42}));
}

}  // namespace
}  // namespace gpumem
