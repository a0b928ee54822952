// gpumem/core/units.hpp
//
// Byte quantities: parsing "512", "64KiB", "1.5 GiB" (KiB/MiB/GiB/TiB, also KB/MB/GB/K/M/G taken as
// binary units) and formatting for messages. Parsing throws gpumem::logic_error naming the text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

// Returns the number of bytes `text` denotes, or std::nullopt when it is not a byte quantity.
std::optional<std::size_t> try_parse_bytes(std::string_view text);

// "1.50 MiB (1572864 B)"-style text for messages.
std::string format_bytes(std::size_t bytes);

}  // namespace gpumem
