// gpumem/mr/detail/pool_size_classes.hpp
//
// The size classes of pool_resource. A request is rounded up to a class size that depends only on
// the requested byte count, so a deallocation (which carries the requested size, as the resource
// contract demands) finds the block's true size without any per-block metadata: that is what lets
// the per-thread caches run without a lookup table.
//
// Classes: 256-byte steps up to 2 KiB, then 8 classes per power of two (every class is at most
// 12.5% larger than the request that falls into it). Sizes above the pool's cached limit are not
// classed: they are rounded to 256 bytes and served exactly by the coalescing best fit.
//
// No rounding here wraps: pool_resource refuses requests above max_allocation_bytes at its entry
// (out_of_memory), and should a larger size reach these helpers all the same, pool_round_up
// saturates at SIZE_MAX (which no upstream serves) and pool_size_class counts units without adding
// to the size, so a rounded size is never below the request.
#pragma once

#include <gpumem/core/checked_arithmetic.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::detail {

inline constexpr std::size_t pool_granularity = 256;
inline constexpr unsigned pool_granularity_shift = 8;
// Class count up to (and including) 4 GiB; pools use a prefix of it (their cached limit).
inline constexpr unsigned pool_max_classes = 8 + 8 * 21;

// `bytes` rounded up to the granularity; SIZE_MAX where that would not fit.
constexpr std::size_t pool_round_up(std::size_t bytes) noexcept {
  std::size_t rounded = 0;
  return round_up_checked(bytes, pool_granularity, rounded) ? rounded : ~std::size_t{0};
}

constexpr unsigned pool_floor_log2(std::uint64_t x) noexcept {
  unsigned r = 0;
  while (x >>= 1)
    ++r;
  return r;
}

// Class index of a request of `bytes` (> 0).
inline unsigned pool_size_class(std::size_t bytes) noexcept {
  std::uint64_t const units =
      (bytes >> pool_granularity_shift) + ((bytes & (pool_granularity - 1)) != 0 ? 1 : 0);
  if (units <= 8) return units == 0 ? 0u : static_cast<unsigned>(units - 1);
  std::uint64_t const m1 = units - 1;
  unsigned const e = 63u - static_cast<unsigned>(__builtin_clzll(m1));  // >= 3
  unsigned const shift = e - 3;
  unsigned const mantissa = static_cast<unsigned>(m1 >> shift);  // 8..15
  return 8 * (e - 2) + (mantissa - 8);
}

// Bytes of a block of class `index`.
constexpr std::size_t pool_class_size(unsigned index) noexcept {
  if (index < 8) return std::size_t{index + 1} << pool_granularity_shift;
  unsigned const e = index / 8 + 2;
  unsigned const mantissa = index % 8 + 8;
  return (std::size_t{mantissa + 1} << (e - 3)) << pool_granularity_shift;
}

}  // namespace gpumem::detail
