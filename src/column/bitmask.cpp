// Counting the set bits of a host bitmask (see bitmask.hpp): whole words by population count,
// the partial words at either end masked first.
#include <gpumem/column/bitmask.hpp>

namespace gpumem {

namespace {
std::size_t popcount(bitmask_word w) noexcept {
  return static_cast<std::size_t>(__builtin_popcount(w));
}
// The bits of a word at positions [from, to) (0 <= from < to <= 32).
bitmask_word bits_between(std::size_t from, std::size_t to) noexcept {
  bitmask_word const upto =
      to == bitmask_word_bits ? ~bitmask_word{0} : (bitmask_word{1} << to) - 1;
  return upto & ~((bitmask_word{1} << from) - 1);
}
}  // namespace

std::size_t count_set_bits(bitmask_word const* mask, std::size_t begin, std::size_t end) noexcept {
  if (end <= begin) return 0;
  std::size_t const first = begin / bitmask_word_bits;
  std::size_t const last = (end - 1) / bitmask_word_bits;  // the word holding bit end - 1
  std::size_t const head = begin % bitmask_word_bits;
  std::size_t const tail = (end - 1) % bitmask_word_bits + 1;
  if (first == last) return popcount(mask[first] & bits_between(head, tail));
  std::size_t count = popcount(mask[first] & bits_between(head, bitmask_word_bits));
  for (std::size_t w = first + 1; w < last; ++w)
    count += popcount(mask[w]);
  return count + popcount(mask[last] & bits_between(0, tail));
}

}  // namespace gpumem
