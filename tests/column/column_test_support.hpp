// Helpers shared by the column tests: seeded random rows and the null count a model expects.
#pragma once

#include "expect_error.hpp"

#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace gpumem::test {

// `n` values, each null with probability `null_share`.
inline std::vector<std::optional<int>> random_ints(std::size_t n, double null_share,
                                                   unsigned seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution is_null(null_share);
  std::vector<std::optional<int>> out(n);
  for (std::size_t i = 0; i < n; ++i)
    if (!is_null(rng)) out[i] = static_cast<int>(rng() % 2000) - 1000;
  return out;
}

// `n` strings of 0..max_bytes ASCII letters and some two- and three-byte characters, each null
// with probability `null_share`.
inline std::vector<std::optional<std::string>> random_strings(std::size_t n, std::size_t max_bytes,
                                                              double null_share, unsigned seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution is_null(null_share);
  static char const* const pieces[] = {"a", "b", "z", " ", "\xc3\xa9", "\xe2\x82\xac", "Q"};
  std::vector<std::optional<std::string>> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (is_null(rng)) continue;
    std::string s;
    std::size_t const target = rng() % (max_bytes + 1);
    while (s.size() < target)
      s += pieces[rng() % (sizeof pieces / sizeof pieces[0])];
    out[i] = s;
  }
  return out;
}

template <class T>
std::size_t model_nulls(std::vector<std::optional<T>> const& rows, std::size_t begin,
                        std::size_t end) {
  std::size_t nulls = 0;
  for (std::size_t i = begin; i < end; ++i)
    nulls += rows[i] ? 0 : 1;
  return nulls;
}

}  // namespace gpumem::test
