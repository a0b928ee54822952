// gpumem/column/strings_column.hpp
//
// Strings columns in the Arrow layout: the UTF-8 characters of every row back to back in the
// column's data buffer, and child 0, the offsets, one more than the rows: row i is characters
// [offsets[i], offsets[i + 1]). Offsets are int32 while the characters fit in 2^31 - 1 bytes and
// int64 beyond (Arrow's "large" strings); readers handle both (strings_column_device_view).
//
//     rows      "do"  null  "you"  ""  "cheese?"
//     offsets   0     2     2      5   5          12        (int32, 6 entries)
//     chars     d o y o u c h e e s e ?                     (12 bytes)
//     mask      1     0     1      1   1                    (bits, LSB first: 0b11101)
//
//   auto c = gpumem::strings_column_from_host({"do", std::nullopt, "you", "", "cheese?"});
//   auto rows = c.slice(2, 5).to_host_strings();            // {"you", "", "cheese?"}
//   auto d = gpumem::make_strings_column(n, offsets, type_id::int32, chars, mask, {}, true);
//
// make_strings_column takes buffers made elsewhere and checks them before anything reads them:
// the offsets are copied to the host (O(rows)) and must start at 0 or above, never decrease, and
// end within the characters; with `validate_utf8` the characters of every valid row are copied
// too and must be well-formed UTF-8 (what Python's strict decoder accepts: no overlong forms, no
// surrogates, nothing above U+10FFFF). A bad column is a gpumem::logic_error naming the row and
// the value, e.g. "strings column: offset of row 7 (12) is below that of row 6 (40)".
//
// Null rows may span characters (Arrow allows it); their bytes are not checked. Thread safety:
// the functions are free of shared state; the columns they make follow column's rules.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/data_type.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {

// The largest character count int32 offsets can address (2^31 - 1 bytes). Columns with more
// characters get int64 offsets.
inline constexpr std::size_t max_int32_offset_bytes = 2147483647;

// A strings column with a copy of `strings` (a null row where an optional is empty; the column
// is nullable exactly when this form is used with at least one row). A braced list of string
// literals alone fits both forms: name the vector type there.
column strings_column_from_host(std::vector<std::optional<std::string>> const& strings,
                                buffer_memory memory = buffer_memory::device);
column strings_column_from_host(std::vector<std::string> const& strings,
                                buffer_memory memory = buffer_memory::device);

// A strings column of `size` rows over existing buffers, checked as the file comment says.
// `offsets` holds size + 1 elements of `offset_type` (int32 or int64; may be empty when size is
// 0), `chars` the characters, `null_mask` (may be empty) bitmask_words(size) words or more.
// `null_count`, when given, must equal the mask's count of nulls.
column make_strings_column(std::size_t size, buffer offsets, type_id offset_type, buffer chars,
                           buffer null_mask = {},
                           std::optional<std::size_t> null_count = std::nullopt,
                           bool validate_utf8 = false);

}  // namespace gpumem
