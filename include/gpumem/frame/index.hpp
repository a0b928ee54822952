// gpumem/frame/index.hpp
//
// index: the row labels of a series or data_frame — either a range_index (three integers, never a
// column) or a column of labels (any column type: int64, strings, ...), pandas' Index with its
// two common shapes.
//
//   frame::index a(frame::range_index(3));                        // 0 1 2
//   frame::index b(gpumem::strings_column_from_host(
//       std::vector<std::string>{"x", "y", "z"}));                 // x y z
//   b.size();                         // 3
//   b.slice(1, 3);                    // y z: a view sharing the column's buffers
//   a.is_range();                     // true; a.range() gives the range_index
//
// Ownership: a column-backed index holds a column handle (shared buffers, column.hpp); slice()
// shares them, copy(true) copies them. Errors: positions outside the index are
// gpumem::logic_error; range() / labels() on the other kind are logic_error too.
// Thread safety: a value type, as column.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/frame/range_index.hpp>

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace gpumem::frame {

class index {
 public:
  // range_index(0).
  index() = default;
  index(range_index r) : labels_(r) {}  // NOLINT: implicit by design
  // The rows of `labels` (a column of any type) are the labels.
  explicit index(column labels) : labels_(std::move(labels)) {}

  std::size_t size() const noexcept;
  bool is_range() const noexcept { return std::holds_alternative<range_index>(labels_); }
  range_index const& range() const;
  column const& labels() const;
  // The labels as a column (a range_index's materialised as int64).
  column to_column() const;

  // Positions [begin, end), sharing memory (logic_error when outside).
  index slice(std::size_t begin, std::size_t end) const;
  // deep: a copy of the label column's memory; otherwise shared (a range is always a value).
  index copy(bool deep) const;

  // The labels of positions [begin, end) as printed (format.hpp's format_rows).
  std::vector<std::string> format(std::size_t begin, std::size_t end) const;

 private:
  std::variant<range_index, column> labels_;
};

}  // namespace gpumem::frame
