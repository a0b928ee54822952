// gpumem/strings/detail/big_uint.hpp — not API: a fixed-capacity unsigned big integer for the
// exact slow paths of strings/convert.hpp (decimal -> double rounding, shortest double digits).
//
// 32-bit limbs, least significant first, no allocation: a value lives on the (device) stack, so
// the capacity is a template argument sized by each algorithm's bounds (decimal_to_double.hpp:
// 128 limbs, as 10^1125 shifted by a few bits is its largest value; shortest_digits.hpp: 40). An
// operation that would pass the capacity sets `overflowed` and drops the high limbs instead of
// writing past the array; the callers' bounds make that unreachable.
#pragma once

#include <gpumem/core/config.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

template <int Capacity>
struct big_uint {
  static constexpr int capacity = Capacity;
  std::uint32_t limb[capacity];
  int size = 0;  // limbs in use; limb[size - 1] != 0 when size > 0
  bool overflowed = false;

  GPUMEM_HD void set(std::uint64_t v) {
    size = 0;
    while (v != 0) {
      limb[size++] = static_cast<std::uint32_t>(v);
      v >>= 32;
    }
  }
  GPUMEM_HD bool is_zero() const { return size == 0; }

  GPUMEM_HD void push(std::uint32_t high) {
    if (high == 0) return;
    if (size == capacity) {
      overflowed = true;
      return;
    }
    limb[size++] = high;
  }

  // this = this * m + a
  GPUMEM_HD void multiply_add(std::uint32_t m, std::uint32_t a) {
    std::uint64_t carry = a;
    for (int i = 0; i < size; ++i) {
      std::uint64_t const t = static_cast<std::uint64_t>(limb[i]) * m + carry;
      limb[i] = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    push(static_cast<std::uint32_t>(carry));
  }

  GPUMEM_HD void multiply_pow10(int k) {
    for (; k >= 9; k -= 9)
      multiply_add(1000000000u, 0);
    std::uint32_t m = 1;
    for (; k > 0; --k)
      m *= 10;
    if (m != 1) multiply_add(m, 0);
  }

  GPUMEM_HD void shift_left(int bits) {
    if (size == 0 || bits <= 0) return;
    int const whole = bits / 32, part = bits % 32;
    if (size + whole + 1 > capacity) {
      overflowed = true;
      return;
    }
    if (part != 0) {
      limb[size] = 0;
      for (int i = size; i > 0; --i)
        limb[i] = (limb[i] << part) | (limb[i - 1] >> (32 - part));
      limb[0] <<= part;
      ++size;
    }
    for (int i = size - 1; i >= 0; --i)
      limb[i + whole] = limb[i];
    for (int i = 0; i < whole; ++i)
      limb[i] = 0;
    size += whole;
    while (size > 0 && limb[size - 1] == 0)
      --size;
  }

  GPUMEM_HD int bit_length() const {
    if (size == 0) return 0;
    int bits = 32 * (size - 1);
    for (std::uint32_t top = limb[size - 1]; top != 0; top >>= 1)
      ++bits;
    return bits;
  }

  // this -= b, where b <= this
  GPUMEM_HD void subtract(big_uint const& b) {
    std::int64_t borrow = 0;
    for (int i = 0; i < size; ++i) {
      std::int64_t t = static_cast<std::int64_t>(limb[i]) - borrow - (i < b.size ? b.limb[i] : 0);
      borrow = t < 0 ? 1 : 0;
      limb[i] = static_cast<std::uint32_t>(t + (borrow << 32));
    }
    while (size > 0 && limb[size - 1] == 0)
      --size;
  }

  GPUMEM_HD void add(big_uint const& b) {
    std::uint64_t carry = 0;
    int const n = size > b.size ? size : b.size;
    for (int i = 0; i < n; ++i) {
      std::uint64_t const t = carry + (i < size ? limb[i] : 0u) + (i < b.size ? b.limb[i] : 0u);
      limb[i] = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    size = n;
    push(static_cast<std::uint32_t>(carry));
  }
};

// <0, 0, >0 as a < b, a == b, a > b
template <int C>
GPUMEM_HD int compare(big_uint<C> const& a, big_uint<C> const& b) {
  if (a.size != b.size) return a.size < b.size ? -1 : 1;
  for (int i = a.size - 1; i >= 0; --i)
    if (a.limb[i] != b.limb[i]) return a.limb[i] < b.limb[i] ? -1 : 1;
  return 0;
}

// compare(a + b, c) without changing them
template <int C>
GPUMEM_HD int compare_sum(big_uint<C> const& a, big_uint<C> const& b, big_uint<C> const& c) {
  big_uint<C> sum = a;
  sum.add(b);
  return compare(sum, c);
}

}  // namespace gpumem::strings::detail
