// gpumem/frame/column_ops.hpp
//
// The per-column operations the frame layer is built from: reductions, the running sum and writes
// into rows. Each runs as device code (gpumem::launch) on both backends;
// series and data_frame call them column by column.
//
//   frame::scalar s = frame::reduce(c, frame::reduction::mean);   // float64, nulls skipped
//   column running = frame::cumsum(c);                            // int64 for an int32 column
//   frame::write_rows(c, 2, column::from_host(std::vector<std::int32_t>{7, 8}));  // rows 2, 3
//
// Reductions (numeric and bool8 columns; strings are logic_error):
//
//   op     result type                                  no valid value (empty, all null/NaN)
//   sum    int64 (signed, bool8), uint64 (unsigned),    0 of the result type (pandas' min_count=0)
//          float32 / float64 (as the column)
//   min    the column's type                            null
//   max    the column's type                            null
//   mean   float64                                      null
//
// Nulls are skipped, and so are NaNs (pandas' skipna=True). Integer sums wrap on overflow, as
// NumPy's do; floating sums accumulate in double. The mean accumulates every column in double
// (NumPy's float64 accumulator), so an integer column's mean never wraps: {INT64_MAX, INT64_MAX}
// gives 9.223372036854776e+18. The order of the additions is fixed by the row
// count alone (a grid-stride pass, then passes over the partial results), so a float result is
// the same on both backends and from run to run.
//
// cumsum: a new column of sum's result type, row i the sum of the valid, non-NaN values of rows
// [0, i]; null rows stay null (and do not stop the sum), NaN rows give NaN.
//
// Deep copies are column::copy (column.hpp): new buffers for fixed-width data, masks and offsets;
// a strings column's characters are shared (immutable).
//
// write_rows(target, begin, values): rows [begin, begin + values.size()) of the fixed-width
// `target` take the rows of `values` (same type), nulls included; a row written null takes only
// its validity bit (its element keeps what it held: a null row's value is unspecified). `values`
// may be a view of `target` (overlapping rows are copied as if through a temporary: NumPy's
// a[1:6] = a[0:5]). Copy on write is the buffer layer's (docs/buffers.md, one rule): the target's
// buffers are written through get_ptr(access::write), which gives them bytes of their own first
// when any other handle (a shallow copy, a view, a frame, a keep-alive) shares them, so everything
// sharing the old bytes keeps seeing the old values; exposed buffers are written in place, where
// their views and the holder of their address see the writes. A target whose buffers are not
// copy-on-write (made by hand, or by column::from_host without options) is first copied into
// copy-on-write buffers: only those can tell whether they are shared. The frame layer's own
// buffers from host data are copy-on-write (series::from_host), so their writes copy only when
// shared. The copy is a kernel: a target (or values) in pinned host memory is a logic_error.
//
// Spilling: every operation takes the pointers of its inputs and outputs inside a spill_lock of
// its own and finishes its work before the lock goes: spilled inputs come back for the
// operation, are never exposed, and may be spilled again afterwards.
//
// Streams: the work runs on the default stream; each call returns when its result is complete.
// Errors: gpumem::logic_error for strings where numbers are needed, type mismatches and rows
// outside the column; out_of_memory from the allocations. Thread safety: the functions share no
// state; a column passed to write_rows must not be used by another thread meanwhile.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/frame/scalar.hpp>

#include <cstddef>

namespace gpumem::frame {

enum class reduction { sum, min, max, mean };
char const* to_string(reduction op) noexcept;

// True for the types reductions and cumsum take (integers, floats, bool8).
bool is_numeric(data_type type) noexcept;

scalar reduce(column const& c, reduction op);
column cumsum(column const& c);
void write_rows(column& target, std::size_t begin, column const& values);

}  // namespace gpumem::frame
