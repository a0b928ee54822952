// gpumem/frame/column_accessor.hpp
//
// column_accessor: the ordered, label-addressed set of columns inside a data_frame (cuDF's
// ColumnAccessor) — pandas' column selection rules in one place.
//
//   frame::column_accessor ca({{"a", col_a}, {"b", col_b}});
//   ca.at("a");                              // the column labelled "a"
//   ca.at(1);                                // the second column
//   ca.select({"b", "a"});                   // a new accessor: b then a
//   ca.select_positions({0}); ca.select_range(0, 1);
//   ca.insert("c", col_c); ca.rename("c", "d"); ca.erase("d");
//
//   // hierarchical labels: every label has the same number of levels
//   frame::column_accessor m({{{"x", "one"}, c1}, {{"x", "two"}, c2}, {{"y", "one"}, c3}});
//   m.select_prefix({"x"});                  // ("one") -> c1, ("two") -> c2: the prefix dropped
//
// Invariants: labels are unique and non-empty, all have levels() levels (the first column fixes
// it; an empty accessor takes any), and all columns have rows() rows. Order is insertion order
// unless a position is given.
//
// Ownership: columns are handles (column.hpp): selections share the columns' buffers, they never
// copy data. Errors: gpumem::logic_error naming the missing label, the bad position, the duplicate
// label, the level count or the row count that does not fit. Thread safety: a value type; const
// members may be called from many threads at once, a mutation needs exclusive access.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/frame/label.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace gpumem::frame {

class column_accessor {
 public:
  column_accessor() = default;
  // The columns in this order (checked as the invariants say).
  explicit column_accessor(std::vector<std::pair<label, column>> columns);

  // Number of columns.
  std::size_t size() const noexcept { return columns_.size(); }
  bool empty() const noexcept { return columns_.empty(); }
  // Rows of every column (0 without columns).
  std::size_t rows() const noexcept { return rows_; }
  // Levels of every label (0 without columns).
  std::size_t levels() const noexcept { return levels_; }
  std::vector<label> const& labels() const noexcept { return labels_; }
  std::vector<column> const& columns() const noexcept { return columns_; }

  bool contains(label const& key) const noexcept { return positions_.count(key) != 0; }
  // The position of `key` (logic_error naming it when absent).
  std::size_t position_of(label const& key) const;
  column const& at(label const& key) const;
  column const& at(std::size_t position) const;
  label const& label_at(std::size_t position) const;

  // New accessors sharing the selected columns.
  // The columns of `keys`, in that order (each must exist; a key may not repeat).
  column_accessor select(std::vector<label> const& keys) const;
  // The columns at `positions`, in that order.
  column_accessor select_positions(std::vector<std::size_t> const& positions) const;
  // The columns at positions [begin, end).
  column_accessor select_range(std::size_t begin, std::size_t end) const;
  // The columns whose labels start with `prefix` (1 to levels() levels), in order. When the prefix
  // is shorter than the labels its levels are dropped from the result's labels (pandas' df["x"]
  // on hierarchical columns); a prefix as long as the labels selects one column, label kept.
  // logic_error naming the prefix when nothing matches.
  column_accessor select_prefix(label const& prefix) const;

  // Adds `c` under `key` at `position` (default: the end). logic_error when the label exists, has
  // another level count, or the column another row count, or the position is past the end.
  void insert(label key, column c, std::optional<std::size_t> position = std::nullopt);
  // Replaces the column of `key` (same rows), or appends it when there is none.
  void set(label const& key, column c);
  // Removes the column of `key` and returns it.
  column pop(label const& key);
  void erase(label const& key) { pop(key); }
  // Gives the column of `from` the label `to` (same level count, not already used).
  void rename(label const& from, label to);

 private:
  void check_new_label(label const& key) const;
  void check_rows(label const& key, column const& c) const;
  void reindex();
  [[noreturn]] void missing(label const& key, char const* what) const;

  std::vector<label> labels_;
  std::vector<column> columns_;
  std::map<label, std::size_t> positions_;
  std::size_t rows_ = 0;
  std::size_t levels_ = 0;
};

}  // namespace gpumem::frame
