// Strings columns from and to host strings (see strings_column.hpp). The host side builds the
// offsets, characters and mask in host vectors and moves each with one buffer transfer; reading
// back copies only the offsets and characters of the rows asked for.
#include "strings_offsets.hpp"

#include <gpumem/column/detail/strings_column.hpp>
#include <gpumem/column/null_mask.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace gpumem {

namespace detail {

std::vector<std::int64_t> offsets_to_host(buffer const& offsets, type_id type, std::size_t first,
                                          std::size_t count) {
  std::vector<std::int64_t> out(count);
  if (count == 0) return out;
  if (type == type_id::int64) {
    offsets.slice(first * sizeof(std::int64_t), count * sizeof(std::int64_t))
        .copy_to_host(out.data(), count * sizeof(std::int64_t));
    return out;
  }
  std::vector<std::int32_t> narrow(count);
  offsets.slice(first * sizeof(std::int32_t), count * sizeof(std::int32_t))
      .copy_to_host(narrow.data(), count * sizeof(std::int32_t));
  for (std::size_t i = 0; i < count; ++i)
    out[i] = narrow[i];
  return out;
}

type_id strings_offset_type(std::size_t chars_bytes, std::size_t int32_limit) noexcept {
  // Never above what int32 can hold, whatever a test asks for.
  std::size_t const limit =
      int32_limit < max_int32_offset_bytes ? int32_limit : max_int32_offset_bytes;
  return chars_bytes <= limit ? type_id::int32 : type_id::int64;
}

column unchecked_strings_column(std::size_t size, buffer offsets, type_id offset_type, buffer chars,
                                buffer null_mask, std::optional<std::size_t> null_count) {
  std::size_t const entries = offsets.empty() ? 0 : size + 1;
  column offsets_child(offset_type, entries, 0, std::move(offsets), buffer(), {}, 0);
  std::vector<column> children;
  children.push_back(std::move(offsets_child));
  return column(type_id::string, size, 0, std::move(chars), std::move(null_mask),
                std::move(children), null_count.value_or(column::unknown_null_count));
}

namespace {

template <class Offset>
buffer offsets_buffer(std::size_t rows, std::function<std::string const*(std::size_t)> const& row,
                      buffer_memory memory) {
  std::vector<Offset> offsets(rows + 1, 0);
  for (std::size_t i = 0; i < rows; ++i) {
    std::string const* s = row(i);
    offsets[i + 1] = offsets[i] + static_cast<Offset>(s == nullptr ? 0 : s->size());
  }
  return buffer::from_host(offsets.data(), offsets.size() * sizeof(Offset), memory);
}

// The column of `rows` rows where row(i) is the string of row i, or null for a null row;
// `nullable` gives the column a mask.
column build_strings_column(std::size_t rows,
                            std::function<std::string const*(std::size_t)> const& row,
                            bool nullable, buffer_memory memory, std::size_t int32_limit) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    std::string const* s = row(i);
    std::size_t const bytes = s == nullptr ? 0 : s->size();
    GPUMEM_EXPECTS(checked_add(total, bytes, total),
                   "strings_column_from_host: the characters of " + std::to_string(rows) +
                       " rows exceed the address space at row " + std::to_string(i));
  }
  type_id const offset_type = strings_offset_type(total, int32_limit);
  buffer offsets = offset_type == type_id::int32 ? offsets_buffer<std::int32_t>(rows, row, memory)
                                                 : offsets_buffer<std::int64_t>(rows, row, memory);
  std::string chars;
  chars.reserve(total);
  std::vector<bool> valid(nullable ? rows : 0);
  std::size_t nulls = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    std::string const* s = row(i);
    if (s != nullptr) chars += *s;
    if (nullable) valid[i] = s != nullptr;
    nulls += s == nullptr ? 1 : 0;
  }
  buffer mask = null_mask_from_host(valid, memory);
  return unchecked_strings_column(rows, std::move(offsets), offset_type,
                                  buffer::from_host(chars.data(), chars.size(), memory),
                                  std::move(mask), nulls);
}

}  // namespace

column strings_column_from_host(std::vector<std::optional<std::string>> const& strings,
                                buffer_memory memory, std::size_t int32_limit) {
  return build_strings_column(
      strings.size(), [&](std::size_t i) { return strings[i] ? &*strings[i] : nullptr; }, true,
      memory, int32_limit);
}

}  // namespace detail

column strings_column_from_host(std::vector<std::optional<std::string>> const& strings,
                                buffer_memory memory) {
  return detail::strings_column_from_host(strings, memory, max_int32_offset_bytes);
}

column strings_column_from_host(std::vector<std::string> const& strings, buffer_memory memory) {
  return detail::build_strings_column(
      strings.size(), [&](std::size_t i) { return &strings[i]; }, false, memory,
      max_int32_offset_bytes);
}

std::vector<std::optional<std::string>> column::to_host_strings() const {
  detail::check_element_type(type_, type_id::string, "column::to_host_strings");
  std::vector<std::optional<std::string>> out(size_);
  if (size_ == 0) return out;
  column const& offsets = child(0);
  std::vector<std::int64_t> const bounds = detail::offsets_to_host(
      offsets.data(), offsets.type().id(), offsets.offset() + offset_, size_ + 1);
  // Only the characters of these rows travel (a slice's first offset may be above 0).
  auto const first = static_cast<std::size_t>(bounds.front());
  auto const last = static_cast<std::size_t>(bounds.back());
  std::string chars(last - first, '\0');
  data_.slice(first, last - first).copy_to_host(chars.data(), chars.size());
  std::vector<bool> const valid = validity_to_host();
  for (std::size_t i = 0; i < size_; ++i) {
    if (!valid[i]) continue;
    auto const begin = static_cast<std::size_t>(bounds[i]) - first;
    out[i] = chars.substr(begin, static_cast<std::size_t>(bounds[i + 1] - bounds[i]));
  }
  return out;
}

}  // namespace gpumem
