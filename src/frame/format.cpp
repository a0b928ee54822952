// Value formatting and the row window of printed series and frames (see format.hpp).
#include "layout.hpp"

#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/frame/format.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpumem::frame {
namespace {

// Shortest round-trip digits in positional notation with at least one decimal: the digits and
// exponent of to_chars' scientific form, placed around the point.
template <class F>
std::string positional(F value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  auto const r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string const sci(buf, r.ptr);  // [-]d[.ddd]e[+-]xx
  std::size_t const e_at = sci.find('e');
  std::string mantissa = sci.substr(0, e_at);
  int const exponent = std::atoi(sci.c_str() + e_at + 1);
  std::string sign;
  if (!mantissa.empty() && mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string whole;
  std::string fraction;
  if (exponent >= 0) {
    auto const n = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= n) {
      whole = digits + std::string(n - digits.size(), '0');
    } else {
      whole = digits.substr(0, n);
      fraction = digits.substr(n);
    }
  } else {
    whole = "0";
    fraction = std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  }
  if (fraction.empty()) fraction = "0";
  return sign + whole + "." + fraction;
}

template <class T>
std::vector<std::string> format_numbers(column const& part) {
  std::vector<std::string> out;
  out.reserve(part.size());
  for (auto const& v : part.to_host<T>()) {
    if (!v) {
      out.emplace_back("<NA>");
    } else if constexpr (std::is_same_v<T, bool>) {
      out.emplace_back(*v ? "True" : "False");
    } else if constexpr (std::is_floating_point_v<T>) {
      out.push_back(positional(*v));
    } else if constexpr (std::is_signed_v<T>) {
      out.push_back(std::to_string(static_cast<long long>(*v)));
    } else {
      out.push_back(std::to_string(static_cast<unsigned long long>(*v)));
    }
  }
  return out;
}

}  // namespace

std::string format_float(double value) {
  return positional(value);
}
std::string format_float(float value) {
  return positional(value);
}

char const* dtype_name(data_type type) noexcept {
  switch (type.id()) {
    case type_id::int8:
      return "Int8";
    case type_id::int16:
      return "Int16";
    case type_id::int32:
      return "Int32";
    case type_id::int64:
      return "Int64";
    case type_id::uint8:
      return "UInt8";
    case type_id::uint16:
      return "UInt16";
    case type_id::uint32:
      return "UInt32";
    case type_id::uint64:
      return "UInt64";
    case type_id::float32:
      return "Float32";
    case type_id::float64:
      return "Float64";
    case type_id::bool8:
      return "boolean";
    case type_id::string:
      return "string";
  }
  return "?";
}

std::vector<std::string> format_rows(column const& c, std::size_t begin, std::size_t end) {
  column const part = c.slice(begin, end);
  switch (c.type().id()) {
    case type_id::int8:
      return format_numbers<std::int8_t>(part);
    case type_id::int16:
      return format_numbers<std::int16_t>(part);
    case type_id::int32:
      return format_numbers<std::int32_t>(part);
    case type_id::int64:
      return format_numbers<std::int64_t>(part);
    case type_id::uint8:
      return format_numbers<std::uint8_t>(part);
    case type_id::uint16:
      return format_numbers<std::uint16_t>(part);
    case type_id::uint32:
      return format_numbers<std::uint32_t>(part);
    case type_id::uint64:
      return format_numbers<std::uint64_t>(part);
    case type_id::float32:
      return format_numbers<float>(part);
    case type_id::float64:
      return format_numbers<double>(part);
    case type_id::bool8:
      return format_numbers<bool>(part);
    case type_id::string:
      break;
  }
  std::vector<std::string> out;
  out.reserve(part.size());
  for (auto& s : part.to_host_strings())
    out.push_back(s ? std::move(*s) : std::string("<NA>"));
  return out;
}

namespace detail {

// pandas 3.1's rule (SeriesFormatter._chk_truncate; DataFrameFormatter._adjust_max_rows and
// _truncate_vertically): a min_rows of 0 is not set; otherwise at most min_rows rows are shown,
// half at each end. With one row to show, a series shows it and no tail; a frame shows its first
// max_rows rows (all of them when min_rows is 1 and max_rows above it), then the dots.
shown_rows rows_to_show(std::size_t rows, print_options const& options, printed what) noexcept {
  if (options.max_rows == 0 || rows <= options.max_rows) return {rows, 0, false};
  std::size_t const fitted =
      options.min_rows == 0 ? options.max_rows : std::min(options.min_rows, options.max_rows);
  std::size_t const half = fitted / 2;
  if (half == 0) return {what == printed::series ? fitted : options.max_rows, 0, true};
  return {half, half, true};
}

std::size_t display_width(std::string const& text) noexcept {
  std::size_t n = 0;
  for (unsigned char c : text)
    n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::string pad_left(std::string const& text, std::size_t width) {
  std::size_t const w = display_width(text);
  return w >= width ? text : std::string(width - w, ' ') + text;
}

std::string pad_right(std::string const& text, std::size_t width) {
  std::size_t const w = display_width(text);
  return w >= width ? text : text + std::string(width - w, ' ');
}

std::string center(std::string const& text, std::size_t width) {
  std::size_t const w = display_width(text);
  if (w >= width) return text;
  std::size_t const pad = width - w;
  std::size_t const left = pad / 2 + (pad & width & 1);
  return std::string(left, ' ') + text + std::string(pad - left, ' ');
}

}  // namespace detail
}  // namespace gpumem::frame
