// Device views in kernels (gpumem::launch: a kernel on the cuda backend, the host thread pool on
// the host backend): fixed-width elements and validity of slices, and the rows of strings columns
// with int32 and int64 offsets, slices whose first offset is above 0 included.
#include "column_test_support.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/detail/strings_column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/cuda/launch.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {
namespace {

// out[row] = value + 1 for valid rows, -1 for null rows.
struct add_one {
  column_device_view in;
  array_view<std::int64_t> out;
  GPUMEM_HD void operator()(thread_index const& t) const {
    auto const row = static_cast<std::size_t>(t.global());
    if (row >= in.size()) return;
    out[row] = in.is_valid(row) ? in.element<std::int32_t>(row) + 1 : -1;
  }
};

// Per row: the byte count (-1 for null), and a hash of the bytes read through element(row).
struct read_strings {
  strings_column_device_view in;
  array_view<std::int64_t> bytes;
  array_view<std::uint64_t> hash;
  GPUMEM_HD void operator()(thread_index const& t) const {
    auto const row = static_cast<std::size_t>(t.global());
    if (row >= in.size()) return;
    if (in.is_null(row)) {
      bytes[row] = -1;
      hash[row] = 0;
      return;
    }
    string_element const e = in.element(row);
    std::uint64_t h = 1469598103934665603ull;
    for (std::int64_t i = 0; i < e.bytes; ++i)
      h = (h ^ static_cast<unsigned char>(e.data[i])) * 1099511628211ull;
    bytes[row] = e.bytes;
    hash[row] = h;
  }
};

std::uint64_t host_hash(std::string const& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

unsigned blocks_for(std::size_t rows) {
  return static_cast<unsigned>((rows + 127) / 128);
}

TEST(column_device_view, kernel_reads_elements_and_validity_of_a_slice) {
  auto const rows = test::random_ints(1000, 0.3, 11);
  column const c = column::from_host(rows).slice(13, 977);  // offset 13: not a multiple of 8
  column_device_view const v = column_device_view::create(c);
  EXPECT_EQ(v.size(), 964u);
  EXPECT_EQ(v.offset(), 13u);
  EXPECT_EQ(v.type(), type_id::int32);
  device_array<std::int64_t> out({c.size()});
  auto s = stream::create();
  launch({blocks_for(c.size()), 128, s.handle()}, add_one{v, out.view()});
  s.synchronize();
  auto const back = out.copy_to_host();
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto const& expected = rows[13 + i];
    ASSERT_EQ(back[i], expected ? *expected + 1 : -1) << "row " << i;
  }
}

void expect_kernel_reads(column const& c, std::vector<std::optional<std::string>> const& rows) {
  strings_column_device_view const v = strings_column_device_view::create(c);
  ASSERT_EQ(v.size(), rows.size());
  if (rows.empty()) return;
  device_array<std::int64_t> bytes({rows.size()});
  device_array<std::uint64_t> hash({rows.size()});
  auto s = stream::create();
  launch({blocks_for(rows.size()), 128, s.handle()}, read_strings{v, bytes.view(), hash.view()});
  s.synchronize();
  auto const b = bytes.copy_to_host();
  auto const h = hash.copy_to_host();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i]) {
      ASSERT_EQ(b[i], -1) << "row " << i;
      continue;
    }
    ASSERT_EQ(b[i], static_cast<std::int64_t>(rows[i]->size())) << "row " << i;
    ASSERT_EQ(h[i], host_hash(*rows[i])) << "row " << i;
  }
}

TEST(strings_column_device_view, kernel_reads_rows_with_int32_offsets) {
  auto const rows = test::random_strings(600, 20, 0.2, 12);
  column const c = strings_column_from_host(rows);
  EXPECT_EQ(strings_column_device_view::create(c).offset_type(), type_id::int32);
  expect_kernel_reads(c, rows);
  expect_kernel_reads(c.slice(101, 555).slice(7, 300), {rows.begin() + 108, rows.begin() + 401});
}

TEST(strings_column_device_view, kernel_reads_rows_with_int64_offsets) {
  auto const rows = test::random_strings(600, 20, 0.2, 13);
  column const c = detail::strings_column_from_host(rows, buffer_memory::device, 64);
  EXPECT_EQ(strings_column_device_view::create(c).offset_type(), type_id::int64);
  expect_kernel_reads(c, rows);
  expect_kernel_reads(c.slice(250, 251), {rows[250]});
  expect_kernel_reads(c.slice(3, 3), {});
}

TEST(strings_column_device_view, kernel_reads_rows_in_managed_memory) {
  auto const rows = test::random_strings(100, 8, 0.1, 14);
  expect_kernel_reads(strings_column_from_host(rows, buffer_memory::managed).slice(1, 99),
                      {rows.begin() + 1, rows.begin() + 99});
}

TEST(column_device_view, create_refuses_what_a_kernel_cannot_read) {
  column const strings = strings_column_from_host(std::vector<std::string>{"a"});
  column const ints = column::from_host(std::vector<int>{1});
  test::expect_logic_error([&] { column_device_view::create(strings); },
                           "column_device_view: a string column has no fixed-width elements");
  test::expect_logic_error(
      [&] { strings_column_device_view::create(ints); },
      "strings_column_device_view: the column holds int32 values, not strings");
  column const pinned = column::from_host(std::vector<int>{1, 2}, buffer_memory::pinned);
  test::expect_logic_error([&] { column_device_view::create(pinned); },
                           "column_device_view: the data buffer is in pinned host memory");
  column const pinned_strings =
      strings_column_from_host(std::vector<std::string>{"ab"}, buffer_memory::pinned);
  test::expect_logic_error([&] { strings_column_device_view::create(pinned_strings); },
                           "in pinned host memory");
  column_device_view const empty = column_device_view::create(column());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_FALSE(empty.nullable());
}

}  // namespace
}  // namespace gpumem
