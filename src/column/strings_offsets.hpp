// Host copies of a strings column's offsets, widened to int64 whatever their stored type, for
// to_host_strings and for the checks of make_strings_column and column(contents).
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/data_type.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::detail {

// Offsets [first, first + count) of `offsets` (elements of `type`, int32 or int64).
std::vector<std::int64_t> offsets_to_host(buffer const& offsets, type_id type, std::size_t first,
                                          std::size_t count);

// The checks of make_strings_column's offsets over rows [offset, offset + size) of a strings
// column whose offsets child is `offsets` and whose characters are `chars`: int32 or int64
// offsets, offset + size + 1 entries of them (or none when size is 0), in the child's buffer and
// aligned, the first not negative, none decreasing, the last within the characters. logic_error
// starting with `prefix` and naming the row and the value otherwise.
void check_strings_rows(column const& offsets, std::size_t offset, std::size_t size,
                        buffer const& chars, char const* prefix);

}  // namespace gpumem::detail
