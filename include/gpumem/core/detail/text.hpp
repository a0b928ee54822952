// gpumem/core/detail/text.hpp
//
// Internal: small text helpers for the parsers of sizes, environment values and allocation logs.
#pragma once

#include <cctype>
#include <string_view>

namespace gpumem::detail {

// `s` without leading and trailing white space (as std::isspace sees it).
inline std::string_view trim_spaces(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

}  // namespace gpumem::detail
