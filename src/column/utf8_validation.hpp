// Well-formed UTF-8 (Unicode's table 3-7, which is what Python's strict decoder accepts): the
// host check behind make_strings_column(..., validate_utf8). The device-side UTF-8 routines
// belong to the strings layer, which comes after this one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace gpumem::detail {

struct utf8_problem {
  std::size_t position = 0;  // of the first byte of the bad sequence
  std::string reason;        // e.g. "0xc3 starts a 2-byte sequence cut short by the end"
};

// The first problem of [bytes, bytes + size), or nothing when it is well-formed.
std::optional<utf8_problem> find_invalid_utf8(unsigned char const* bytes, std::size_t size);

}  // namespace gpumem::detail
