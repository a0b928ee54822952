// How the frame layer's numeric kernels (reduce.cu, cumsum.cu) read a column's values (src/frame,
// not installed).
//
// Values are read through an accumulator type chosen by the column's type (acc_kind): int64 for
// signed integers, uint64 for unsigned and bool8, double for floats. The element type is a
// run-time switch inside the kernel (uniform across a launch), which keeps the instantiations to
// three per kernel rather than one per column type.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/frame/column_ops.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace gpumem::frame::detail {

enum class acc_kind { signed_int, unsigned_int, floating };

inline acc_kind kind_of(type_id t) {
  switch (t) {
    case type_id::int8:
    case type_id::int16:
    case type_id::int32:
    case type_id::int64:
      return acc_kind::signed_int;
    case type_id::uint8:
    case type_id::uint16:
    case type_id::uint32:
    case type_id::uint64:
    case type_id::bool8:
      return acc_kind::unsigned_int;
    default:
      return acc_kind::floating;
  }
}

// f(Acc{}) with the accumulator type Acc of a column of type `t`: the one place that picks the
// instantiation of a numeric kernel.
template <class F>
auto with_accumulator(type_id t, F&& f) {
  switch (kind_of(t)) {
    case acc_kind::signed_int:
      return f(std::int64_t{});
    case acc_kind::unsigned_int:
      return f(std::uint64_t{});
    default:
      return f(double{});
  }
}

// The type of a sum (and a running sum) of a column of type `t`: see column_ops.hpp's table.
inline type_id sum_type(type_id t) {
  switch (kind_of(t)) {
    case acc_kind::signed_int:
      return type_id::int64;
    case acc_kind::unsigned_int:
      return t == type_id::bool8 ? type_id::int64 : type_id::uint64;
    default:
      return t;
  }
}

// `what` (the operation's name) refuses a column without numeric values.
inline void check_numeric(column const& c, char const* what) {
  GPUMEM_EXPECTS(is_numeric(c.type()), std::string(what) + ": a " + to_string(c.type()) +
                                           " column has no numeric values");
}

// Reads row `row` of `in` as Acc; false for a NaN (skipped like a null).
template <class Acc>
GPUMEM_HD bool load(column_device_view const& in, std::size_t row, Acc& out) {
  switch (in.type()) {
    case type_id::int8:
      out = static_cast<Acc>(in.element<std::int8_t>(row));
      return true;
    case type_id::int16:
      out = static_cast<Acc>(in.element<std::int16_t>(row));
      return true;
    case type_id::int32:
      out = static_cast<Acc>(in.element<std::int32_t>(row));
      return true;
    case type_id::int64:
      out = static_cast<Acc>(in.element<std::int64_t>(row));
      return true;
    case type_id::uint8:
    case type_id::bool8:
      out = static_cast<Acc>(in.element<std::uint8_t>(row));
      return true;
    case type_id::uint16:
      out = static_cast<Acc>(in.element<std::uint16_t>(row));
      return true;
    case type_id::uint32:
      out = static_cast<Acc>(in.element<std::uint32_t>(row));
      return true;
    case type_id::uint64:
      out = static_cast<Acc>(in.element<std::uint64_t>(row));
      return true;
    case type_id::float32: {
      float const v = in.element<float>(row);
      out = static_cast<Acc>(v);
      return v == v;
    }
    case type_id::float64: {
      double const v = in.element<double>(row);
      out = static_cast<Acc>(v);
      return v == v;
    }
    default:
      return false;
  }
}

// Integer sums wrap: added as uint64 (no signed overflow), read back as Acc.
template <class Acc>
GPUMEM_HD Acc add(Acc a, Acc b) {
  if constexpr (std::numeric_limits<Acc>::is_integer) {
    return static_cast<Acc>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
  } else {
    return a + b;
  }
}

}  // namespace gpumem::frame::detail
