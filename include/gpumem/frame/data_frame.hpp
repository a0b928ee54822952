// gpumem/frame/data_frame.hpp
//
// data_frame: labelled columns of one length (a column_accessor) and an index — pandas'
// DataFrame over gpumem columns.
//
//   frame::data_frame df({{"a", column::from_host(std::vector<std::int32_t>{1, 2, 3})},
//                         {"name", strings_column_from_host(std::vector<std::string>{...})}});
//   frame::series a = df["a"];           // the column with the frame's index, name "a"
//   df.head(2); df.slice(1, 3);          // views: column slices, no copy
//   df.copy(false);                      // shares every buffer; copy(true) copies them
//   df.set_rows<std::int32_t>("a", 0, 2, 7);   // copy on write, as series::set_rows
//   df.sum();                            // {("a", 6)}: numeric columns only
//   std::cout << df;                     // pandas' repr (format.hpp)
//
// Invariant: every column has index().size() rows. Without an index given, range_index(rows).
// Column selection and mutation are column_accessor's (its rules and errors); select() and
// select_prefix() give frames sharing the columns and the index.
//
// Reductions (sum, min, max, mean) and cumsum act per column on the numeric and bool8 columns,
// in order, and leave the others out (pandas' numeric_only=True); the per-column rules are
// column_ops.hpp's. Writes follow column_ops.hpp's write_rows (the buffer's copy-on-write): a
// frame that shares a column's bytes with any other frame, series or view gets its own first.
// copy(true) uses column::copy (strings characters are shared: immutable).
//
// Errors: gpumem::logic_error naming the label, position or length at fault. Thread safety: a
// value type; const members from many threads at once, mutation with exclusive access.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/frame/column_accessor.hpp>
#include <gpumem/frame/format.hpp>
#include <gpumem/frame/index.hpp>
#include <gpumem/frame/label.hpp>
#include <gpumem/frame/scalar.hpp>
#include <gpumem/frame/series.hpp>

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::frame {

// One result of a per-column reduction: the column's label and the value.
struct labelled_scalar {
  label name;
  scalar value;
};

class data_frame {
 public:
  data_frame() = default;
  explicit data_frame(column_accessor columns, std::optional<frame::index> idx = std::nullopt);
  explicit data_frame(std::vector<std::pair<label, column>> columns,
                      std::optional<frame::index> idx = std::nullopt)
      : data_frame(column_accessor(std::move(columns)), std::move(idx)) {}

  column_accessor const& columns() const noexcept { return columns_; }
  frame::index const& index() const noexcept { return index_; }
  std::size_t rows() const noexcept { return index_.size(); }
  std::size_t num_columns() const noexcept { return columns_.size(); }

  // The column of `key` with this frame's index, named `key`.
  series operator[](label const& key) const;
  data_frame select(std::vector<label> const& keys) const;
  data_frame select_prefix(label const& prefix) const;

  void insert(label key, column c, std::optional<std::size_t> position = std::nullopt);
  // Replaces the column of `key` (or appends it).
  void set(label const& key, column c);
  void erase(label const& key) { columns_.erase(key); }
  void rename(label const& from, label to) { columns_.rename(from, std::move(to)); }
  // A new index of rows() labels.
  void set_index(frame::index idx);

  data_frame slice(std::size_t begin, std::size_t end) const;
  data_frame head(std::size_t n = 5) const;
  data_frame tail(std::size_t n = 5) const;
  data_frame copy(bool deep = true) const;

  // Rows [begin, end) of column `key` take `value` (T the column's type).
  template <class T>
  void set_rows(label const& key, std::size_t begin, std::size_t end, T value) {
    check_rows(begin, end);
    write(key, begin, column::from_host(std::vector<T>(end - begin, value)));
  }
  template <class T>
  void set_rows(label const& key, std::size_t begin, std::vector<T> const& values) {
    write(key, begin, column::from_host(values));
  }

  std::vector<labelled_scalar> sum() const { return reduce_numeric(reduction::sum); }
  std::vector<labelled_scalar> min() const { return reduce_numeric(reduction::min); }
  std::vector<labelled_scalar> max() const { return reduce_numeric(reduction::max); }
  std::vector<labelled_scalar> mean() const { return reduce_numeric(reduction::mean); }
  data_frame cumsum() const;

  std::string to_string(print_options const& options = {}) const;

 private:
  void check_rows(std::size_t begin, std::size_t end) const;
  void write(label const& key, std::size_t begin, column const& rows);
  std::vector<labelled_scalar> reduce_numeric(reduction op) const;

  column_accessor columns_;
  frame::index index_;
};

std::ostream& operator<<(std::ostream& out, data_frame const& df);

}  // namespace gpumem::frame
