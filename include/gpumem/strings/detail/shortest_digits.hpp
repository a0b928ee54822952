// gpumem/strings/detail/shortest_digits.hpp — not API: the digits of repr(float).
//
// shortest_digits(v) finds the shortest decimal d1d2...dn x 10^(point - n) that reads back as the
// finite positive double v, and among the shortest the nearest to v (a tie, which cannot happen
// with equal-width rounding intervals, would go to the even digit) — the digits CPython's dtoa
// (mode 0) gives repr(). The algorithm is Steele & White's free-format printing with Burger &
// Dybvig's boundary handling, in exact big-integer arithmetic:
//
//   v = r / s, and the halfway points to the neighbouring doubles are v - m- / s and v + m+ / s
//   (m- is half of m+ at a power of two, where the gap below is half the gap above). They are
//   inclusive when v's significand is even (round-half-even reads them back as v).
//   Scale s by 10^k so that the upper bound is just below 1; then repeatedly multiply r, m-, m+ by
//   10 and take the integer part of r / s as the next digit, until the digits so far (or the same
//   digits with the last one raised) lie strictly inside the interval. If both do, the nearer one.
//
// At most 17 digits; the big integers stay below 2^1140 (r = 2f x 10^323 for the smallest
// subnormal, times 10 in the search for k).
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/big_uint.hpp>
#include <gpumem/strings/types.hpp>

#include <cstdint>

namespace gpumem::strings::detail {

struct decimal_digits {
  char digit[17];  // values 0..9
  int count;
  int point;  // the value is 0.d1d2...dn x 10^point
};

// Finite, positive v given by its bits.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline decimal_digits shortest_digits(std::uint64_t bits) {
  int const biased = static_cast<int>((bits >> 52) & 0x7FF);
  std::uint64_t const fraction = bits & ((std::uint64_t{1} << 52) - 1);
  std::uint64_t const f = biased == 0 ? fraction : fraction | (std::uint64_t{1} << 52);
  int const e = biased == 0 ? -1074 : biased - 1075;
  bool const inclusive = (f & 1) == 0;
  bool const unequal_gaps = fraction == 0 && biased > 1;

  using number = big_uint<40>;  // the values stay below 2^1140
  number r, s, m_plus, m_minus;
  r.set(f);
  s.set(1);
  m_plus.set(1);
  m_minus.set(1);
  // v = f 2^e = r / s, the gaps m+ / s above and m- / s below (doubled, to keep them integers)
  if (e >= 0) {
    r.shift_left(e + (unequal_gaps ? 2 : 1));
    s.shift_left(unequal_gaps ? 2 : 1);
    m_plus.shift_left(e + (unequal_gaps ? 1 : 0));
    m_minus.shift_left(e);
  } else {
    r.shift_left(unequal_gaps ? 2 : 1);
    s.shift_left(-e + (unequal_gaps ? 2 : 1));
    if (unequal_gaps) m_plus.shift_left(1);
  }

  // k: the smallest with (r + m+) / s < 10^k (<= when exclusive). Estimate from the binary
  // exponent, then correct.
  int bit_length = 0;
  for (std::uint64_t t = f; t != 0; t >>= 1)
    ++bit_length;
  double const log10_2 = 0.30102999566398114;
  int k = static_cast<int>(static_cast<double>(e + bit_length - 1) * log10_2);
  if (k >= 0)
    s.multiply_pow10(k);
  else {
    r.multiply_pow10(-k);
    m_plus.multiply_pow10(-k);
    m_minus.multiply_pow10(-k);
  }
  auto const high_reaches = [&](number const& scale) {
    int const c = compare_sum(r, m_plus, scale);
    return inclusive ? c >= 0 : c > 0;
  };
  while (high_reaches(s)) {
    s.multiply_add(10, 0);
    ++k;
  }
  for (;;) {  // the estimate may also be one too high
    number tenth = r;
    tenth.multiply_add(10, 0);
    number m10 = m_plus;
    m10.multiply_add(10, 0);
    if (compare_sum(tenth, m10, s) > (inclusive ? -1 : 0)) break;
    r = tenth;
    m_plus = m10;
    m_minus.multiply_add(10, 0);
    --k;
  }

  decimal_digits out{};
  out.point = k;
  for (;;) {
    r.multiply_add(10, 0);
    m_plus.multiply_add(10, 0);
    m_minus.multiply_add(10, 0);
    char d = 0;
    while (compare(r, s) >= 0) {
      r.subtract(s);
      ++d;
    }
    int const low_cmp = compare(r, m_minus);
    bool const low = inclusive ? low_cmp <= 0 : low_cmp < 0;
    bool const high = high_reaches(s);
    if (!low && !high && out.count < 16) {
      out.digit[out.count++] = d;
      continue;
    }
    if (low && high) {
      number twice = r;
      twice.shift_left(1);
      int const c = compare(twice, s);
      if (c > 0 || (c == 0 && (d & 1) != 0)) ++d;
    } else if (high) {
      ++d;
    }
    out.digit[out.count++] = d;
    return out;
  }
}

}  // namespace gpumem::strings::detail
