// gpumem/core/checked_arithmetic.hpp
//
// Size arithmetic that cannot wrap: every round-up, `header + size` and
// `count * element` in gpumem goes through these, on the host and in device code (GPUMEM_HD, no
// exceptions: each returns whether the result fits and writes it only then).
//
// The size policy they serve (docs/mr.md, "Sizes that cannot be served"):
//   * A single requested byte count that no allocator can serve (above max_allocation_bytes, or
//     one whose rounding or header would pass SIZE_MAX) is gpumem::out_of_memory naming that
//     count; device code returns null and records the failure for the host's check().
//   * A size derived from several caller values that overflows (count * itemsize, offset + size
//     of a range, a range that wraps the address space) describes no object that can exist: that
//     is gpumem::logic_error naming the values.
#pragma once

#include <gpumem/core/config.hpp>

#include <cstddef>

namespace gpumem {

// The largest byte count an allocation of gpumem may have: PTRDIFF_MAX, as for any C++ object
// (a pointer difference inside it must be representable). No device or host holds half of the
// 64-bit address space, so every larger request is out of memory; below it, a round-up to any
// power of two up to 2^62 cannot wrap.
inline constexpr std::size_t max_allocation_bytes = ~std::size_t{0} >> 1;

// a + b, when it fits in size_t.
GPUMEM_HD constexpr bool checked_add(std::size_t a, std::size_t b, std::size_t& out) noexcept {
  if (a > ~std::size_t{0} - b) return false;
  out = a + b;
  return true;
}

// a * b, when it fits in size_t.
GPUMEM_HD constexpr bool checked_mul(std::size_t a, std::size_t b, std::size_t& out) noexcept {
  if (b != 0 && a > ~std::size_t{0} / b) return false;
  out = a * b;
  return true;
}

// `value` rounded up to a multiple of `step` (> 0), when that fits in size_t. A power-of-two step
// costs a mask, any other a division.
GPUMEM_HD constexpr bool round_up_checked(std::size_t value, std::size_t step,
                                          std::size_t& out) noexcept {
  std::size_t const below = (step & (step - 1)) == 0 ? value & ~(step - 1) : value - value % step;
  if (below == value) {
    out = value;
    return true;
  }
  return checked_add(below, step, out);
}

// a + b, or SIZE_MAX when that does not fit: for counters that must not wrap (totals over a
// program's life, byte sums of queued items).
GPUMEM_HD constexpr std::size_t saturating_add(std::size_t a, std::size_t b) noexcept {
  std::size_t sum = 0;
  return checked_add(a, b, sum) ? sum : ~std::size_t{0};
}

}  // namespace gpumem
