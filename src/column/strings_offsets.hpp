// Host copies of a strings column's offsets, widened to int64 whatever their stored type, for
// to_host_strings and for the checks of make_strings_column.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/data_type.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::detail {

// Offsets [first, first + count) of `offsets` (elements of `type`, int32 or int64).
std::vector<std::int64_t> offsets_to_host(buffer const& offsets, type_id type, std::size_t first,
                                          std::size_t count);

}  // namespace gpumem::detail
