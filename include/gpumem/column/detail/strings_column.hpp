// gpumem/column/detail/strings_column.hpp
//
// strings_column_from_host with the int32/int64 threshold as a parameter, so tests reach the
// int64 path with a few bytes instead of 2 GiB. The public functions pass
// max_int32_offset_bytes (2^31 - 1).
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/column.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::detail {

// int32 when `chars_bytes` <= `int32_limit`, else int64.
type_id strings_offset_type(std::size_t chars_bytes, std::size_t int32_limit) noexcept;

column strings_column_from_host(std::vector<std::optional<std::string>> const& strings,
                                buffer_memory memory, std::size_t int32_limit);

}  // namespace gpumem::detail
