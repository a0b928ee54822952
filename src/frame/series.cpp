// series (see series.hpp), and its printing in pandas' layout (format.hpp).
#include "layout.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/frame/column_ops.hpp>
#include <gpumem/frame/series.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::frame {

series::series(column values, std::optional<frame::index> idx, label name)
    : values_(std::move(values)),
      index_(idx ? std::move(*idx) : frame::index(range_index(values_.size()))),
      name_(std::move(name)) {
  GPUMEM_EXPECTS(index_.size() == values_.size(),
                 "series: the index has " + std::to_string(index_.size()) + " labels for " +
                     std::to_string(values_.size()) + " rows");
}

void series::check_rows(std::size_t begin, std::size_t end) const {
  GPUMEM_EXPECTS(begin <= end && end <= size(),
                 "series: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") are outside the series of " + std::to_string(size()) + " rows");
}

series series::slice(std::size_t begin, std::size_t end) const {
  check_rows(begin, end);
  return series(values_.slice(begin, end), index_.slice(begin, end), name_);
}

series series::head(std::size_t n) const {
  return slice(0, std::min(n, size()));
}

series series::tail(std::size_t n) const {
  return slice(size() - std::min(n, size()), size());
}

series series::copy(bool deep) const {
  if (!deep) return *this;
  return series(values_.copy(), index_.copy(true), name_);
}

void series::set_null(std::size_t begin, std::size_t end) {
  check_rows(begin, end);
  GPUMEM_EXPECTS(is_numeric(type()), "series::set_null: strings columns cannot be written");
  // `end - begin` null rows of the column's type: a mask of zeros over zeroed data.
  std::size_t const rows = end - begin;
  std::size_t const bytes = rows * size_of(type());
  std::vector<unsigned char> const zeros(std::max(bytes, bitmask_allocation_bytes(rows)), 0);
  column const nulls(type(), rows, buffer::from_host(zeros.data(), bytes),
                     buffer::from_host(zeros.data(), bitmask_allocation_bytes(rows)), rows);
  write(begin, nulls);
}

void series::write(std::size_t begin, column const& rows) {
  write_rows(values_, begin, rows);
}

series series::cumsum() const {
  return series(frame::cumsum(values_), index_, name_);
}

std::string series::to_string(print_options const& options) const {
  std::string footer;
  if (!name_.empty()) footer += "Name: " + name_.to_string() + ", ";
  std::size_t const n = size();
  if (n == 0) return "Series([], " + footer + "dtype: " + dtype_name(type()) + ")";
  detail::shown_rows const shown = detail::rows_to_show(n, options, detail::printed::series);
  std::vector<std::string> labels = index_.format(0, shown.head);
  std::vector<std::string> cells = format_rows(values_, 0, shown.head);
  if (shown.truncated) {
    for (auto& s : index_.format(n - shown.tail, n))
      labels.push_back(std::move(s));
    for (auto& s : format_rows(values_, n - shown.tail, n))
      cells.push_back(std::move(s));
    footer += "Length: " + std::to_string(n) + ", ";
  }
  // One label per printed row; the rows below index both vectors.
  GPUMEM_EXPECTS(labels.size() == cells.size(), "series::to_string: the index gave " +
                                                    std::to_string(labels.size()) + " labels for " +
                                                    std::to_string(cells.size()) + " printed rows");
  std::size_t label_width = 0;
  std::size_t cell_width = 0;
  for (auto const& s : labels)
    label_width = std::max(label_width, detail::display_width(s));
  for (auto const& s : cells)
    cell_width = std::max(cell_width, detail::display_width(s) + 1);  // pandas' leading space
  std::string out;
  for (std::size_t i = 0; i <= cells.size(); ++i) {
    if (shown.truncated && i == shown.head) {  // a blank label, the dots centred
      out += std::string(label_width, ' ') + "   " +
             detail::center(cell_width > 3 ? "..." : "..", cell_width) + "\n";
    }
    if (i == cells.size()) break;  // past the last row: only the dots may follow it
    out += detail::pad_right(labels[i], label_width) + "   " +
           detail::pad_left(cells[i], cell_width) + "\n";
  }
  return out + footer + "dtype: " + dtype_name(type());
}

std::ostream& operator<<(std::ostream& out, series const& s) {
  return out << s.to_string();
}

}  // namespace gpumem::frame
