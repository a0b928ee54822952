// Checks of column buffers and host copies of masks (see column_checks.hpp).
#include "column_checks.hpp"

#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <cstdint>
#include <string>

namespace gpumem::detail {

void check_aligned(buffer const& b, std::size_t alignment, char const* what, char const* name) {
  // buffer::is_aligned neither unspills nor exposes a spillable buffer.
  if (b.is_aligned(alignment)) return;
  // Not aligned: the address is only for the message (a plain buffer, or one held for a moment).
  spill_lock lock;
  auto const address = reinterpret_cast<std::uintptr_t>(b.get_ptr(access::read));
  throw logic_error(std::string(what) + ": the " + name + " buffer at address " +
                    std::to_string(address) + " is not aligned to " + std::to_string(alignment) +
                    " bytes");
}

void check_holds(buffer const& b, std::size_t count, std::size_t width, char const* what,
                 char const* name) {
  std::size_t bytes = 0;
  GPUMEM_EXPECTS(checked_mul(count, width, bytes),
                 std::string(what) + ": " + std::to_string(count) + " " + name + " elements of " +
                     std::to_string(width) + " bytes exceed the address space");
  GPUMEM_EXPECTS(b.size() >= bytes,
                 std::string(what) + ": the " + name + " buffer has " + std::to_string(b.size()) +
                     " bytes, " + std::to_string(count) + " elements of " + std::to_string(width) +
                     " bytes need " + std::to_string(bytes));
}

void check_mask(buffer const& mask, std::size_t rows, std::optional<std::size_t> null_count,
                char const* what) {
  if (null_count) {
    GPUMEM_EXPECTS(*null_count <= rows, std::string(what) + ": null_count " +
                                            std::to_string(*null_count) + " is above the " +
                                            std::to_string(rows) + " rows");
    GPUMEM_EXPECTS(
        *null_count == 0 || !mask.empty(),
        std::string(what) + ": null_count " + std::to_string(*null_count) + " without a null mask");
  }
  if (mask.empty()) return;
  std::size_t const needed = bitmask_words(rows) * sizeof(bitmask_word);
  GPUMEM_EXPECTS(mask.size() >= needed,
                 std::string(what) + ": the null mask has " + std::to_string(mask.size()) +
                     " bytes, " + std::to_string(rows) + " rows need " + std::to_string(needed));
  check_aligned(mask, sizeof(bitmask_word), what, "null mask");
}

std::vector<bitmask_word> mask_words_to_host(buffer const& mask, std::size_t first_bit,
                                             std::size_t bits) {
  if (bits == 0) return {};
  std::size_t const first_word = first_bit / bitmask_word_bits;
  std::size_t const words = bitmask_words(first_bit + bits) - first_word;
  std::vector<bitmask_word> out(words);
  mask.slice(first_word * sizeof(bitmask_word), words * sizeof(bitmask_word))
      .copy_to_host(out.data(), words * sizeof(bitmask_word));
  return out;
}

std::size_t count_nulls(buffer const& mask, std::size_t first_bit, std::size_t bits) {
  if (mask.empty() || bits == 0) return 0;
  std::vector<bitmask_word> const words = mask_words_to_host(mask, first_bit, bits);
  std::size_t const head = first_bit % bitmask_word_bits;
  return bits - count_set_bits(words.data(), head, head + bits);
}

}  // namespace gpumem::detail
