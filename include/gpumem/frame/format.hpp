// gpumem/frame/format.hpp
//
// How series and data frames print: pandas' repr of its nullable ("masked") dtypes, which is
// what a column with a validity mask is.
//
//   std::cout << df;                             // or df.to_string(), s.to_string(options)
//
//         a  name     f                         header: the labels, right-aligned
//   0     1     x   0.5                         index left-aligned, values right-aligned
//   1  <NA>    yy  1.25                         every null is <NA>
//   2   300  <NA>  -2.0
//
// Values: integers in decimal; floats with the shortest digits that read back to the same value,
// always positional, at least one decimal (0.1, 2.0, 1e16 as 10000000000000000.0, 1e-05 as
// 0.00001; NaN, inf, -inf); bool8 as True/False; strings as they are (widths in code points),
// all as pandas prints its masked dtypes. The dtype
// line uses pandas' nullable names: Int8..Int64, UInt8..UInt64, Float32, Float64, boolean,
// string. Layout as pandas': a series is "<index>   <values>" then "Name: x, dtype: Int64"; a
// frame joins its columns with one space after giving each value a leading one; hierarchical
// labels print one header line per level, a label shown only where it differs from the column
// before. Past max_rows rows only the first and last min(min_rows, max_rows) / 2 are shown (a
// min_rows of 0: max_rows / 2), around a ".." row; when that is 0, the first row of a series or
// the first max_rows rows of a frame, then the dots (as pandas 3.1). The footer gives the size
// ("Length: 100, dtype: Int64", "[100 rows x 2 columns]"). Empty: "Series([], dtype: Int64)",
// "Empty DataFrame\nColumns: [a, b]\nIndex: []". Columns are never elided (pandas' display width
// is not modelled). Only the rows shown are copied to the host.
//
// Thread safety: free functions without state.
#pragma once

#include <gpumem/column/column.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace gpumem::frame {

struct print_options {
  std::size_t max_rows = 60;  // pandas' display.max_rows; 0: never truncate
  std::size_t min_rows = 10;  // pandas' display.min_rows: rows shown when truncated; 0: max_rows
};

// "Int64", "Float32", "boolean", "string", ...
char const* dtype_name(data_type type) noexcept;
// Rows [begin, end) of `c` as printed (logic_error when outside the column).
std::vector<std::string> format_rows(column const& c, std::size_t begin, std::size_t end);
// A double / a float32 value as printed: "0.1", "2.0", "0.00001", "NaN", "-inf".
std::string format_float(double value);
std::string format_float(float value);

namespace detail {
// The positions shown for `rows` rows: [0, head) and [rows - tail, rows), with truncated set when
// rows were left out (the dots go between them; tail may be 0, then they come last).
struct shown_rows {
  std::size_t head = 0;
  std::size_t tail = 0;
  bool truncated = false;
};
// pandas truncates series and frames alike but for one case (rows_to_show in format.cpp).
enum class printed { series, frame };
shown_rows rows_to_show(std::size_t rows, print_options const& options, printed what) noexcept;
// Display width of UTF-8 text: its code points.
std::size_t display_width(std::string const& text) noexcept;
}  // namespace detail

}  // namespace gpumem::frame
