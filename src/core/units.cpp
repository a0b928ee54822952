#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/detail/text.hpp>
#include <gpumem/core/units.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace gpumem {

namespace {

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// log2 of the multiplier `unit` names (binary whatever its spelling), or -1 when it names none.
int unit_shift(std::string_view unit) {
  std::string upper;
  for (char c : unit)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.empty() || upper == "B") return 0;
  if (upper == "K" || upper == "KB" || upper == "KIB") return 10;
  if (upper == "M" || upper == "MB" || upper == "MIB") return 20;
  if (upper == "G" || upper == "GB" || upper == "GIB") return 30;
  if (upper == "T" || upper == "TB" || upper == "TIB") return 40;
  return -1;
}

// ceil(0.`digits` × 2^shift), exactly: the decimal fraction is multiplied by the multiplier digit
// by digit from its last digit (a long multiplication; no floating point, any number of digits).
// What carries out of the first digit is the whole part; a non-zero digit left behind is a
// fraction of a byte, which rounds up.
std::size_t fraction_bytes(std::string_view digits, int shift) {
  std::uint64_t const multiplier = std::uint64_t{1} << shift;
  std::uint64_t carry = 0;  // stays below the multiplier (at most 2^40): no overflow
  bool remainder = false;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    std::uint64_t const t = static_cast<std::uint64_t>(*it - '0') * multiplier + carry;
    remainder = remainder || t % 10 != 0;
    carry = t / 10;
  }
  return static_cast<std::size_t>(carry) + (remainder ? 1 : 0);
}

}  // namespace

// A number (digits with at most one decimal point, at least one digit) and an optional unit.
// Parsed exactly in integers: whole bytes are exact up to SIZE_MAX, a fraction of a byte rounds
// up (so a quantity that is not zero never parses as 0 bytes), and anything else, too large
// included, is std::nullopt.
std::optional<std::size_t> try_parse_bytes(std::string_view text) {
  text = detail::trim_spaces(text);
  std::size_t end = 0;
  while (end < text.size() && is_digit(text[end]))
    ++end;
  std::string_view const whole = text.substr(0, end);
  std::string_view fraction;
  if (end < text.size() && text[end] == '.') {
    std::size_t const first = ++end;
    while (end < text.size() && is_digit(text[end]))
      ++end;
    fraction = text.substr(first, end - first);
  }
  if (whole.empty() && fraction.empty()) return std::nullopt;  // "", ".", ".GiB", "MiB"
  int const shift = unit_shift(detail::trim_spaces(text.substr(end)));
  if (shift < 0) return std::nullopt;
  std::size_t value = 0;
  for (char c : whole) {
    if (!checked_mul(value, std::size_t{10}, value) ||
        !checked_add(value, static_cast<std::size_t>(c - '0'), value))
      return std::nullopt;
  }
  if (shift > 0) {
    if (value > (std::numeric_limits<std::size_t>::max() >> shift)) return std::nullopt;
    value <<= shift;
  }
  if (!checked_add(value, fraction_bytes(fraction, shift), value)) return std::nullopt;
  return value;
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
