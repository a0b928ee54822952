// gpumem/column/bitmask.hpp
//
// Validity bitmasks in the Arrow layout: one bit per row, 1 = valid, 0 = null, least significant
// bit first — row i is bit (i % 8) of byte (i / 8). gpumem reads and writes masks in 32-bit words
// (row i is bit i % 32 of word i / 32), which on the little-endian hosts and GPUs gpumem runs on
// is the same bit of the same byte. A mask's allocation is padded to a multiple of 64 bytes
// (bitmask_allocation_bytes), as Arrow recommends, so word reads never pass its end.
//
//   std::vector<bitmask_word> mask(bitmask_allocation_bytes(n) / sizeof(bitmask_word));
//   set_bit(mask.data(), 7);
//   bit_is_set(mask.data(), 7);                       // true
//   count_set_bits(mask.data(), 3, 40);               // valid rows among [3, 40)
//
// bit_is_set, set_bit and clear_bit are GPUMEM_HD: kernels use them on device masks. set_bit and
// clear_bit are plain read-modify-writes of a word: threads that write bits of one word at once
// must not use them. count_set_bits reads host memory (copy a device mask back first).
#pragma once

#include <gpumem/core/config.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem {

using bitmask_word = std::uint32_t;
inline constexpr std::size_t bitmask_word_bits = 32;
// Arrow's recommended padding of a buffer, and gpumem's for every mask it allocates.
inline constexpr std::size_t bitmask_padding_bytes = 64;

// Words that hold `bits` bits. Cannot overflow.
GPUMEM_HD constexpr std::size_t bitmask_words(std::size_t bits) noexcept {
  return bits / bitmask_word_bits + (bits % bitmask_word_bits != 0 ? 1 : 0);
}

// Bytes to allocate for a mask of `bits` bits: whole words, rounded up to 64 bytes (0 for 0
// bits). Cannot overflow: the word count is at most SIZE_MAX / 32 + 1.
GPUMEM_HD constexpr std::size_t bitmask_allocation_bytes(std::size_t bits) noexcept {
  std::size_t const bytes = bitmask_words(bits) * sizeof(bitmask_word);
  return (bytes + bitmask_padding_bytes - 1) / bitmask_padding_bytes * bitmask_padding_bytes;
}

GPUMEM_HD inline bool bit_is_set(bitmask_word const* mask, std::size_t bit) noexcept {
  return ((mask[bit / bitmask_word_bits] >> (bit % bitmask_word_bits)) & 1u) != 0;
}

GPUMEM_HD inline void set_bit(bitmask_word* mask, std::size_t bit) noexcept {
  mask[bit / bitmask_word_bits] |= bitmask_word{1} << (bit % bitmask_word_bits);
}

GPUMEM_HD inline void clear_bit(bitmask_word* mask, std::size_t bit) noexcept {
  mask[bit / bitmask_word_bits] &= ~(bitmask_word{1} << (bit % bitmask_word_bits));
}

// The number of set bits among bits [begin, end) of a mask in host memory (0 when end <= begin).
std::size_t count_set_bits(bitmask_word const* mask, std::size_t begin, std::size_t end) noexcept;

}  // namespace gpumem
