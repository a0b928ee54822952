// gpumem/frame/series.hpp
//
// series: one column with an index and an optional name — pandas' Series over a gpumem column.
//
//   auto s = frame::series::from_host<std::int64_t>({{1}, std::nullopt, {3}}, "x");
//   s.sum();                          // scalar int64 4 (nulls skipped)
//   auto top = s.head(2);             // a view: the same buffers (buffer::owns_same_memory)
//   auto mine = s.copy(true);         // deep: new buffers
//   s.set_rows<std::int64_t>(0, 2, 10);   // rows [0, 2) = 10; copies first if shared
//   std::cout << s;                   // 0      1 / 1   <NA> / 2      3 / Name: x, dtype: Int64
//   frame::apply(strings_series, my_udf);  // a string UDF per row (frame/apply.hpp)
//
// The index has as many rows as the column; without one it is range_index(size). head, tail and
// slice are views (column slices, index slices); copy(false) shares the buffers too, copy(true)
// (pandas' default) copies them. Reductions and cumsum are column_ops.hpp's (device code, the
// rules for nulls and empty columns are there); printing is format.hpp's.
//
// Writes (set_rows, set_null) follow column_ops.hpp's write_rows (the buffer's copy-on-write): in
// place when no other handle shares the bytes, otherwise on bytes of its own made first, so views
// and shallow copies taken before keep their values (pandas' copy-on-write behaviour).
//
// Errors: gpumem::logic_error for an index of another length, rows outside the series, a value
// type that is not the column's, reductions of strings. Thread safety: a value type, as column;
// writes need exclusive access to this series object.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/column_ops.hpp>
#include <gpumem/frame/format.hpp>
#include <gpumem/frame/index.hpp>
#include <gpumem/frame/label.hpp>
#include <gpumem/frame/scalar.hpp>

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::frame {

// The options of the buffers the frame layer makes from host data: device memory, copy-on-write
// (writes through frames rely on the buffer's copy-on-write, column_ops.hpp), spillable where a
// global spill manager is set.
inline buffer_options frame_buffer_options() noexcept {
  buffer_options options;
  options.copy_on_write = true;
  return options;
}

class series {
 public:
  // An empty int8 series.
  series() = default;
  // `values` with `idx` (default: range_index(values.size())) and `name`.
  explicit series(column values, std::optional<frame::index> idx = std::nullopt, label name = {});
  series(series const&) = default;
  series& operator=(series const&) = default;
  // A moved-from series is empty, as series(): its values and its index both move out (a default
  // move left the index's labels over no rows).
  series(series&& other) noexcept
      : values_(std::move(other.values_)),
        index_(std::exchange(other.index_, frame::index())),
        name_(std::move(other.name_)) {}
  series& operator=(series&& other) noexcept {
    values_ = std::move(other.values_);
    index_ = std::exchange(other.index_, frame::index());
    name_ = std::move(other.name_);
    return *this;
  }

  // Numeric series from host values are made of copy-on-write buffers (frame_buffer_options()),
  // so their first write needs no copy when nothing shares them.
  template <class T>
  static series from_host(std::vector<T> const& values, label name = {}) {
    return series(column::from_host(values, frame_buffer_options()), std::nullopt, std::move(name));
  }
  template <class T>
  static series from_host(std::vector<std::optional<T>> const& values, label name = {}) {
    return series(column::from_host(values, frame_buffer_options()), std::nullopt, std::move(name));
  }
  static series from_host_strings(std::vector<std::optional<std::string>> const& values,
                                  label name = {}) {
    return series(strings_column_from_host(values), std::nullopt, std::move(name));
  }

  column const& values() const noexcept { return values_; }
  frame::index const& index() const noexcept { return index_; }
  label const& name() const noexcept { return name_; }
  void set_name(label name) { name_ = std::move(name); }
  data_type type() const noexcept { return values_.type(); }
  std::size_t size() const noexcept { return values_.size(); }
  bool empty() const noexcept { return values_.empty(); }

  // Views: rows [begin, end), the first n, the last n (n past the size: all).
  series slice(std::size_t begin, std::size_t end) const;
  series head(std::size_t n = 5) const;
  series tail(std::size_t n = 5) const;
  series copy(bool deep = true) const;

  // Rows [begin, end) take `value`; T must be the column's type (see the file comment).
  template <class T>
  void set_rows(std::size_t begin, std::size_t end, T value) {
    check_rows(begin, end);
    write(begin, column::from_host(std::vector<T>(end - begin, value)));
  }
  // Rows [begin, begin + values.size()) take `values` (empty optionals make nulls).
  template <class T>
  void set_rows(std::size_t begin, std::vector<T> const& values) {
    write(begin, column::from_host(values));
  }
  // Rows [begin, end) become null (the column gains a mask when it had none).
  void set_null(std::size_t begin, std::size_t end);

  scalar sum() const { return reduce(values_, reduction::sum); }
  scalar min() const { return reduce(values_, reduction::min); }
  scalar max() const { return reduce(values_, reduction::max); }
  scalar mean() const { return reduce(values_, reduction::mean); }
  series cumsum() const;

  template <class T>
  std::vector<std::optional<T>> to_host() const {
    return values_.to_host<T>();
  }

  std::string to_string(print_options const& options = {}) const;

 private:
  void check_rows(std::size_t begin, std::size_t end) const;
  void write(std::size_t begin, column const& rows);

  column values_;
  frame::index index_;
  label name_;
};

std::ostream& operator<<(std::ostream& out, series const& s);

}  // namespace gpumem::frame
