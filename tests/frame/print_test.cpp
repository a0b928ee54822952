// Printing: the expected strings are what pandas 3.1 prints for the same data in its nullable
// dtypes (Int64, Float64, string, boolean, ...), e.g.
//   repr(pd.Series(pd.array([1, None, 3], dtype="Int64")))
#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/data_frame.hpp>
#include <gpumem/frame/format.hpp>
#include <gpumem/frame/series.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::strings_column_from_host;
using gpumem::frame::data_frame;
using gpumem::frame::format_float;
using gpumem::frame::label;
using gpumem::frame::range_index;
using gpumem::frame::series;

template <class T>
using opt_vec = std::vector<std::optional<T>>;
using strings = std::vector<std::optional<std::string>>;

template <class T>
std::vector<T> iota(std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(i);
  return v;
}

TEST(print, floats) {
  EXPECT_EQ(format_float(0.1), "0.1");
  EXPECT_EQ(format_float(2.0), "2.0");
  EXPECT_EQ(format_float(1e16), "10000000000000000.0");
  EXPECT_EQ(format_float(1e-5), "0.00001");
  EXPECT_EQ(format_float(-0.0), "-0.0");
  EXPECT_EQ(format_float(123456789.125), "123456789.125");
  EXPECT_EQ(format_float(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_float(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(format_float(0.1f), "0.1");  // the float32's own shortest digits
  EXPECT_EQ(format_float(1.0 / 3), "0.3333333333333333");
}

TEST(print, series_with_nulls) {
  auto const s = series::from_host<std::int64_t>({{1}, std::nullopt, {3}});
  EXPECT_EQ(s.to_string(),
            "0       1\n"
            "1    <NA>\n"
            "2       3\n"
            "dtype: Int64");
  std::ostringstream out;
  out << s;
  EXPECT_EQ(out.str(), s.to_string());
}

TEST(print, frame_mixed_types) {
  data_frame const df({{"a", column::from_host(opt_vec<std::int32_t>{1, std::nullopt, 300})},
                       {"name", strings_column_from_host(strings{"x", "yy", std::nullopt})},
                       {"f", column::from_host(std::vector<double>{0.5, 1.25, -2.0})}});
  EXPECT_EQ(df.to_string(),
            "      a  name     f\n"
            "0     1     x   0.5\n"
            "1  <NA>    yy  1.25\n"
            "2   300  <NA>  -2.0");
}

TEST(print, frame_string_index) {
  data_frame const df(
      {{"a", column::from_host(opt_vec<std::int32_t>{1, std::nullopt, 300})}},
      gpumem::frame::index(strings_column_from_host(std::vector<std::string>{"r1", "row2", "r3"})));
  EXPECT_EQ(df.to_string(),
            "         a\n"
            "r1       1\n"
            "row2  <NA>\n"
            "r3     300");
}

TEST(print, series_truncated) {
  auto const s = series::from_host(iota<std::int64_t>(61), "v");
  EXPECT_EQ(s.to_string(),
            "0      0\n"
            "1      1\n"
            "2      2\n"
            "3      3\n"
            "4      4\n"
            "      ..\n"
            "56    56\n"
            "57    57\n"
            "58    58\n"
            "59    59\n"
            "60    60\n"
            "Name: v, Length: 61, dtype: Int64");
  // 60 rows are shown whole.
  EXPECT_EQ(series::from_host(iota<std::int64_t>(60)).to_string().find(".."), std::string::npos);
  // Wider values: three dots, centred as Python's str.center.
  std::vector<std::optional<std::int8_t>> v(61);
  for (std::size_t i = 1; i < v.size(); ++i)
    v[i] = static_cast<std::int8_t>(i - 1);
  std::string const narrow = series::from_host(v).to_string({10, 4});
  EXPECT_EQ(narrow,
            "0     <NA>\n"
            "1        0\n"
            "      ... \n"
            "59      58\n"
            "60      59\n"
            "Length: 61, dtype: Int8");
}

TEST(print, frame_truncated) {
  std::vector<double> quarters(100);
  for (std::size_t i = 0; i < quarters.size(); ++i)
    quarters[i] = static_cast<double>(i) / 4;
  data_frame const df(
      {{"a", column::from_host(iota<std::int64_t>(100))}, {"b", column::from_host(quarters)}});
  EXPECT_EQ(df.to_string(),
            "     a      b\n"
            "0    0    0.0\n"
            "1    1   0.25\n"
            "2    2    0.5\n"
            "3    3   0.75\n"
            "4    4    1.0\n"
            "..  ..    ...\n"
            "95  95  23.75\n"
            "96  96   24.0\n"
            "97  97  24.25\n"
            "98  98   24.5\n"
            "99  99  24.75\n"
            "\n"
            "[100 rows x 2 columns]");
  EXPECT_EQ(data_frame({{"bbbbbb", column::from_host(iota<std::int64_t>(100))}}).to_string({60, 4}),
            "    bbbbbb\n"
            "0        0\n"
            "1        1\n"
            "..     ...\n"
            "98      98\n"
            "99      99\n"
            "\n"
            "[100 rows x 1 columns]");
}

// Options whose min(min_rows, max_rows) / 2 is 0, and a min_rows of 0 (pandas: not set, so
// max_rows counts): what pandas 3.1.1 prints for the same options
// (pd.option_context("display.max_rows", 1, "display.min_rows", 10) and so on). A series then
// shows its first row, a frame its first max_rows rows, and both the dots after them.
TEST(print, one_row_or_no_min_rows_when_truncated) {
  auto const s = series::from_host(iota<std::int64_t>(10), "v");
  data_frame const df({{"v", column::from_host(iota<std::int64_t>(10))}});
  std::string const one_row =
      "0    0\n"
      "    ..\n"
      "Name: v, Length: 10, dtype: Int64";
  EXPECT_EQ(s.to_string({1, 10}), one_row);
  EXPECT_EQ(s.to_string({9, 1}), one_row);
  EXPECT_EQ(df.to_string({1, 10}),
            "    v\n"
            "0   0\n"
            ".. ..\n"
            "\n"
            "[10 rows x 1 columns]");
  EXPECT_EQ(df.to_string({9, 1}),
            "    v\n"
            "0   0\n"
            "1   1\n"
            "2   2\n"
            "3   3\n"
            "4   4\n"
            "5   5\n"
            "6   6\n"
            "7   7\n"
            "8   8\n"
            ".. ..\n"
            "\n"
            "[10 rows x 1 columns]");
  EXPECT_EQ(s.to_string({5, 0}),
            "0    0\n"
            "1    1\n"
            "    ..\n"
            "8    8\n"
            "9    9\n"
            "Name: v, Length: 10, dtype: Int64");
  EXPECT_EQ(df.to_string({5, 0}),
            "    v\n"
            "0   0\n"
            "1   1\n"
            ".. ..\n"
            "8   8\n"
            "9   9\n"
            "\n"
            "[10 rows x 1 columns]");
  EXPECT_EQ(s.to_string({2, 10}),
            "0    0\n"
            "    ..\n"
            "9    9\n"
            "Name: v, Length: 10, dtype: Int64");
}

TEST(print, hierarchical_labels) {
  auto i64 = [](std::vector<std::int64_t> v) { return column::from_host(v); };
  data_frame const two({{{"longname", "x"}, i64({5, 7})},
                        {{"longname", "yy"}, i64({1, 2})},
                        {{"b", "z"}, i64({3, 4})}});
  EXPECT_EQ(two.to_string(),
            "  longname     b\n"
            "         x yy  z\n"
            "0        5  1  3\n"
            "1        7  2  4");
  data_frame const three({{{"a", "x", "p"}, i64({5, 7})},
                          {{"a", "x", "q"}, i64({1, 2})},
                          {{"a", "y", "q"}, i64({3, 4})},
                          {{"b", "y", "q"}, i64({3, 4})}});
  EXPECT_EQ(three.to_string(),
            "   a        b\n"
            "   x     y  y\n"
            "   p  q  q  q\n"
            "0  5  1  3  3\n"
            "1  7  2  4  4");
}

TEST(print, empty) {
  EXPECT_EQ(series::from_host(std::vector<std::int64_t>{}, "n").to_string(),
            "Series([], Name: n, dtype: Int64)");
  data_frame const df({{"a", column::from_host(std::vector<std::int64_t>{})},
                       {"b", strings_column_from_host(std::vector<std::string>{})}});
  EXPECT_EQ(df.to_string(),
            "Empty DataFrame\n"
            "Columns: [a, b]\n"
            "Index: []");
  data_frame const no_columns(gpumem::frame::column_accessor(), range_index(3));
  EXPECT_EQ(no_columns.to_string(),
            "Empty DataFrame\n"
            "Columns: []\n"
            "Index: [0, 1, 2]");
  data_frame const long_index(gpumem::frame::column_accessor(), range_index(1000));
  EXPECT_EQ(long_index.to_string({60, 4}),
            "Empty DataFrame\n"
            "Columns: []\n"
            "Index: [0, 1, ..., 998, 999]");
}

TEST(print, types_and_indexes) {
  auto const floats = series::from_host<double>({1e16, 1e-5, 123456789.125, -0.0, std::nullopt});
  EXPECT_EQ(floats.to_string(),
            "0    10000000000000000.0\n"
            "1                0.00001\n"
            "2          123456789.125\n"
            "3                   -0.0\n"
            "4                   <NA>\n"
            "dtype: Float64");
  EXPECT_EQ(series::from_host<float>({0.1f, 2.0f, std::nullopt}).to_string(),
            "0     0.1\n"
            "1     2.0\n"
            "2    <NA>\n"
            "dtype: Float32");
  EXPECT_EQ(series::from_host<bool>({true, false, std::nullopt}, label{"a", "b"}).to_string(),
            "0     True\n"
            "1    False\n"
            "2     <NA>\n"
            "Name: (a, b), dtype: boolean");
  series const ranged(column::from_host(std::vector<std::int8_t>{0, -1, 2, -3, 4}),
                      range_index(10, 20, 2));
  EXPECT_EQ(ranged.to_string(),
            "10     0\n"
            "12    -1\n"
            "14     2\n"
            "16    -3\n"
            "18     4\n"
            "dtype: Int8");
  series const utf8(
      strings_column_from_host(std::vector<std::string>{"é", "abc", "日本"}),
      gpumem::frame::index(strings_column_from_host(std::vector<std::string>{"ü", "x", "yz"})));
  EXPECT_EQ(utf8.to_string(),
            "ü       é\n"
            "x     abc\n"
            "yz     日本\n"
            "dtype: string");
  EXPECT_EQ(series::from_host(std::vector<std::uint64_t>{0, ~0ull}).to_string(),
            "0                       0\n"
            "1    18446744073709551615\n"
            "dtype: UInt64");
}

// A series whose range index ends near INT64_MAX: its label used to vanish in the index's slice
// and printing read the first label of an empty list.
TEST(print, range_index_near_int64_max) {
  auto const big = std::numeric_limits<std::int64_t>::max();
  series const s(column::from_host(std::vector<std::int64_t>{42}),
                 gpumem::frame::index(range_index(big - 2, big, 3)), label("x"));
  EXPECT_EQ(s.to_string(),
            "9223372036854775805    42\n"
            "Name: x, dtype: Int64");
  EXPECT_EQ(s.head(1).to_string(), s.to_string());
  data_frame const df({{label("x"), column::from_host(std::vector<std::int64_t>{42})}},
                      gpumem::frame::index(range_index(big - 2, big, 3)));
  EXPECT_EQ(df.to_string(),
            "                      x\n"
            "9223372036854775805  42");
}

TEST(print, scalars) {
  auto const s = series::from_host<std::int32_t>({{4}, std::nullopt, {-1}});
  EXPECT_EQ(s.sum().to_string(), "3");
  EXPECT_EQ(s.mean().to_string(), "1.5");
  EXPECT_EQ(s.head(0).min().to_string(), "<NA>");
  std::ostringstream out;
  out << s.max();
  EXPECT_EQ(out.str(), "4");
}

}  // namespace
