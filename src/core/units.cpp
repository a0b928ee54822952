#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/units.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace gpumem {

std::optional<std::size_t> try_parse_bytes(std::string_view text) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
      s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
      s.remove_suffix(1);
    return s;
  };
  text = trim(text);
  std::size_t digits = 0;
  bool seen_point = false;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) ||
                                  (text[digits] == '.' && !seen_point))) {
    seen_point = seen_point || text[digits] == '.';
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::string number(text.substr(0, digits));
  std::string unit;
  for (char c : trim(text.substr(digits)))
    unit += static_cast<char>(std::toupper(c));
  double multiplier = 1;
  if (unit.empty() || unit == "B") {
    multiplier = 1;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    multiplier = static_cast<double>(KiB);
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    multiplier = static_cast<double>(MiB);
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    multiplier = static_cast<double>(GiB);
  } else if (unit == "T" || unit == "TB" || unit == "TIB") {
    multiplier = static_cast<double>(GiB) * 1024.0;
  } else {
    return std::nullopt;
  }
  if (!seen_point && multiplier == 1) {
    std::size_t value = 0;
    for (char c : number) {
      if (!checked_mul(value, 10, value) ||
          !checked_add(value, static_cast<std::size_t>(c - '0'), value))
        return std::nullopt;
    }
    return value;
  }
  // 2^64 exactly (the double nearest SIZE_MAX): converting it, or more, to size_t is undefined,
  // and so is llround above 2^63.
  constexpr double two_to_64 = 18446744073709551616.0;
  double const value = std::round(std::stod(number) * multiplier);
  if (!std::isfinite(value) || value >= two_to_64) return std::nullopt;
  return static_cast<std::size_t>(value);
}

std::string format_bytes(std::size_t bytes) {
  char buffer[64];
  if (bytes >= GiB) {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB (%zu B)", static_cast<double>(bytes) / GiB,
                  bytes);
  } else if (bytes >= MiB) {
    std::snprintf(buffer, sizeof buffer, "%.2f MiB (%zu B)", static_cast<double>(bytes) / MiB,
                  bytes);
  } else if (bytes >= KiB) {
    std::snprintf(buffer, sizeof buffer, "%.2f KiB (%zu B)", static_cast<double>(bytes) / KiB,
                  bytes);
  } else {
    std::snprintf(buffer, sizeof buffer, "%zu B", bytes);
  }
  return buffer;
}

}  // namespace gpumem
