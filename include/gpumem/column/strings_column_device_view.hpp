// gpumem/column/strings_column_device_view.hpp
//
// strings_column_device_view: what a kernel takes to read a strings column row by row — the
// characters, the offsets (int32 or int64, both handled), the mask, the offset and the size;
// trivially copyable, owning nothing. The per-row string transforms of the strings layer read
// their input through it, on both backends.
//
//   struct lengths {
//     gpumem::strings_column_device_view in;
//     std::int64_t* out;
//     GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
//       auto const row = t.global();
//       if (row >= in.size()) return;
//       out[row] = in.is_valid(row) ? in.element(row).bytes : -1;
//     }
//   };
//
// element(row) is the row's bytes: {pointer to its first character, byte count}, the slice's
// offset applied. A null row's range is whatever the offsets say (usually empty); test
// is_valid(row) first. Creation, lifetime and memory rules are those of column_device_view.
// Thread safety: a plain value; any number of threads may read one view.
#pragma once

#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/data_type.hpp>
#include <gpumem/core/config.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem {

class column;

// The bytes of one row of a strings column (UTF-8, not null-terminated).
struct string_element {
  char const* data = nullptr;
  std::int64_t bytes = 0;
};

class strings_column_device_view {
 public:
  strings_column_device_view() = default;
  // The view of a strings column (logic_error for other types or pinned memory).
  static strings_column_device_view create(column const& strings);

  GPUMEM_HD std::size_t size() const noexcept { return rows_.size(); }
  GPUMEM_HD std::size_t offset() const noexcept { return rows_.offset(); }
  GPUMEM_HD bool nullable() const noexcept { return rows_.nullable(); }
  GPUMEM_HD bool is_valid(std::size_t row) const noexcept { return rows_.is_valid(row); }
  GPUMEM_HD bool is_null(std::size_t row) const noexcept { return rows_.is_null(row); }
  // Offsets entry `entry` of the column's buffers (an absolute entry: the offset not applied).
  GPUMEM_HD std::int64_t offset_entry(std::size_t entry) const noexcept {
    if (offset_type_ == type_id::int64) return static_cast<std::int64_t const*>(offsets_)[entry];
    return static_cast<std::int32_t const*>(offsets_)[entry];
  }
  // The bytes of `row` (0 <= row < size()).
  GPUMEM_HD string_element element(std::size_t row) const noexcept {
    std::size_t const entry = rows_.offset() + row;
    std::int64_t const begin = offset_entry(entry);
    return {static_cast<char const*>(rows_.head()) + begin, offset_entry(entry + 1) - begin};
  }
  GPUMEM_HD type_id offset_type() const noexcept { return offset_type_; }

 private:
  column_device_view rows_;  // the characters as data, the mask, offset and size
  void const* offsets_ = nullptr;
  type_id offset_type_ = type_id::int32;
};

}  // namespace gpumem
