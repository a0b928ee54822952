// gpumem/core/units.hpp
//
// Byte quantities: parsing "512", "64KiB", "1.5 GiB" (B/KiB/MiB/GiB/TiB, also KB/MB/GB/TB/K/M/G/T
// taken as binary units, any case) and formatting for messages.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

// Returns the number of bytes `text` denotes, or std::nullopt when it is not a byte quantity
// (callers turn that into a gpumem::logic_error naming the text, as the environment does). The
// number is digits with at most one decimal point and at least one digit ("1.5", ".5", "2."), then
// an optional unit; surrounding blanks are ignored. It is converted exactly, without floating
// point: whole bytes are exact up to SIZE_MAX, a fraction of a byte rounds UP to the next whole
// byte ("1.5" is 2 bytes, "0.4" and "0.0001KiB" are 1), so a quantity that is not zero never
// becomes 0 bytes. More than SIZE_MAX bytes is std::nullopt.
std::optional<std::size_t> try_parse_bytes(std::string_view text);

// "1.50 MiB (1572864 B)"-style text for messages.
std::string format_bytes(std::size_t bytes);

}  // namespace gpumem
