// make_strings_column (see strings_column.hpp): buffers made elsewhere become a strings column
// only after their offsets (and, when asked, their characters) have been read back and checked on
// the host, so a bad column is an exception here rather than a wild read in a kernel later.
#include "column_checks.hpp"
#include "strings_offsets.hpp"
#include "utf8_validation.hpp"

#include <gpumem/column/detail/strings_column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {

namespace {

constexpr char const* what = "strings column";

// Entry `entry` of the offsets of rows [first_row, first_row + rows], named by its row.
std::string offset_name(std::size_t entry, std::size_t first_row, std::size_t rows) {
  if (entry < rows) return "offset of row " + std::to_string(first_row + entry);
  if (rows == 0) return "the only offset";
  return "end of row " + std::to_string(first_row + rows - 1);
}

// The offsets of rows [first_row, first_row + bounds.size() - 1) start at 0 or above, never
// decrease, and end within `chars_bytes`; messages start with `prefix`.
void check_offsets(std::vector<std::int64_t> const& bounds, std::size_t first_row,
                   std::size_t chars_bytes, char const* prefix) {
  std::size_t const rows = bounds.size() - 1;
  GPUMEM_EXPECTS(bounds.front() >= 0, std::string(prefix) + ": offset of row " +
                                          std::to_string(first_row) + " (" +
                                          std::to_string(bounds.front()) + ") is negative");
  for (std::size_t k = 1; k < bounds.size(); ++k) {
    GPUMEM_EXPECTS(bounds[k] >= bounds[k - 1], std::string(prefix) + ": " +
                                                   offset_name(k, first_row, rows) + " (" +
                                                   std::to_string(bounds[k]) + ") is below " +
                                                   (k < rows ? "that" : "the offset") + " of row " +
                                                   std::to_string(first_row + k - 1) + " (" +
                                                   std::to_string(bounds[k - 1]) + ")");
  }
  GPUMEM_EXPECTS(static_cast<std::uint64_t>(bounds.back()) <= chars_bytes,
                 std::string(prefix) + ": " + offset_name(rows, first_row, rows) + " (" +
                     std::to_string(bounds.back()) + ") is past the " +
                     std::to_string(chars_bytes) + " bytes of characters");
}

void check_utf8(std::vector<std::int64_t> const& bounds, buffer const& chars,
                buffer const& null_mask, std::size_t rows) {
  auto const first = static_cast<std::size_t>(bounds.front());
  auto const last = static_cast<std::size_t>(bounds.back());
  std::vector<unsigned char> text(last - first);
  chars.slice(first, last - first).copy_to_host(text.data(), text.size());
  std::vector<bitmask_word> const valid = null_mask.empty()
                                              ? std::vector<bitmask_word>()
                                              : detail::mask_words_to_host(null_mask, 0, rows);
  for (std::size_t row = 0; row < rows; ++row) {
    if (!valid.empty() && !bit_is_set(valid.data(), row)) continue;  // a null row's bytes
    auto const begin = static_cast<std::size_t>(bounds[row]) - first;
    auto const bytes = static_cast<std::size_t>(bounds[row + 1] - bounds[row]);
    auto const problem = detail::find_invalid_utf8(text.data() + begin, bytes);
    GPUMEM_EXPECTS(!problem, std::string(what) + ": row " + std::to_string(row) +
                                 " is not valid UTF-8: at byte " +
                                 std::to_string(problem ? problem->position : 0) + " of the row, " +
                                 (problem ? problem->reason : std::string()));
  }
}

}  // namespace

namespace detail {

void check_strings_rows(column const& offsets, std::size_t offset, std::size_t size,
                        buffer const& chars, char const* prefix) {
  type_id const type = offsets.type().id();
  GPUMEM_EXPECTS(type == type_id::int32 || type == type_id::int64,
                 std::string(prefix) + ": strings offsets must be int32 or int64, not " +
                     to_string(offsets.type()));
  // Arrow's offsets are never null, and a device view reads no mask of them.
  GPUMEM_EXPECTS(!offsets.nullable(),
                 std::string(prefix) +
                     ": strings offsets have no null mask (the offsets child has "
                     "one of " +
                     std::to_string(offsets.null_mask().size()) + " bytes)");
  if (size == 0 && offsets.empty()) return;  // no rows and no offsets: nothing is read
  std::size_t entries = 0;                   // offset + size + 1
  GPUMEM_EXPECTS(checked_add(offset, size, entries) && checked_add(entries, 1, entries),
                 std::string(prefix) + ": offset " + std::to_string(offset) + " and size " +
                     std::to_string(size) + " overflow");
  GPUMEM_EXPECTS(offsets.size() >= entries,
                 std::string(prefix) + ": the offsets child has " + std::to_string(offsets.size()) +
                     " entries, rows [" + std::to_string(offset) + ", " +
                     std::to_string(offset + size) + ") need " + std::to_string(entries));
  std::size_t const width = size_of(type);
  // The child's own size was checked against its buffer when it was made; checked again here,
  // as a kernel reads the buffer, not the child's size.
  std::size_t in_buffer = 0;
  GPUMEM_EXPECTS(checked_add(offsets.offset(), entries, in_buffer),
                 std::string(prefix) + ": the offsets child's offset " +
                     std::to_string(offsets.offset()) + " overflows");
  check_holds(offsets.data(), in_buffer, width, prefix, "offsets");
  check_aligned(offsets.data(), width, prefix, "offsets");
  std::vector<std::int64_t> const bounds =
      offsets_to_host(offsets.data(), type, offsets.offset() + offset, size + 1);
  check_offsets(bounds, offset, chars.size(), prefix);
}

}  // namespace detail

column make_strings_column(std::size_t size, buffer offsets, type_id offset_type, buffer chars,
                           buffer null_mask, std::optional<std::size_t> null_count,
                           bool validate_utf8) {
  GPUMEM_EXPECTS(
      offset_type == type_id::int32 || offset_type == type_id::int64,
      std::string(what) + ": offsets must be int32 or int64, not " + to_string(offset_type));
  detail::check_mask(null_mask, size, null_count, what);
  if (null_count && !null_mask.empty()) {
    std::size_t const counted = detail::count_nulls(null_mask, 0, size);
    GPUMEM_EXPECTS(counted == *null_count,
                   std::string(what) + ": null_count " + std::to_string(*null_count) +
                       " given, the null mask has " + std::to_string(counted) + " null rows");
  }
  if (size == 0 && offsets.empty()) {
    return detail::unchecked_strings_column(0, std::move(offsets), offset_type, std::move(chars),
                                            std::move(null_mask), null_count);
  }
  std::size_t entries = 0;
  GPUMEM_EXPECTS(checked_add(size, 1, entries), std::string(what) + ": " + std::to_string(size) +
                                                    " rows need more offsets " +
                                                    "than the address space holds");
  std::size_t const width = size_of(offset_type);
  detail::check_holds(offsets, entries, width, what, "offsets");
  detail::check_aligned(offsets, width, what, "offsets");
  std::vector<std::int64_t> const bounds =
      detail::offsets_to_host(offsets, offset_type, 0, entries);
  check_offsets(bounds, 0, chars.size(), what);
  if (validate_utf8) check_utf8(bounds, chars, null_mask, size);
  return detail::unchecked_strings_column(size, std::move(offsets), offset_type, std::move(chars),
                                          std::move(null_mask), null_count);
}

}  // namespace gpumem
