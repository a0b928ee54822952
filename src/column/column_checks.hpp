// Host-side checks and copies shared by the column constructors and make_strings_column. Every
// check throws gpumem::logic_error whose message starts with `what` and names the values.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/bitmask.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace gpumem::detail {

// `buffer` (named `name` in messages) starts at an address that is a multiple of `alignment`.
void check_aligned(buffer const& b, std::size_t alignment, char const* what, char const* name);
// `count` elements of `width` bytes fit in `b`.
void check_holds(buffer const& b, std::size_t count, std::size_t width, char const* what,
                 char const* name);
// A mask (may be empty) serves `rows` rows, and `null_count` (when given) is possible for it.
void check_mask(buffer const& mask, std::size_t rows, std::optional<std::size_t> null_count,
                char const* what);

// The mask words that hold bits [first_bit, first_bit + bits), copied to the host; bit
// first_bit % 32 of the first word is bit `first_bit` of the mask.
std::vector<bitmask_word> mask_words_to_host(buffer const& mask, std::size_t first_bit,
                                             std::size_t bits);
// Null rows among bits [first_bit, first_bit + bits) of a device mask.
std::size_t count_nulls(buffer const& mask, std::size_t first_bit, std::size_t bits);

}  // namespace gpumem::detail
