// data_frame (see data_frame.hpp), and its printing in pandas' layout (format.hpp).
#include "layout.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/frame/column_ops.hpp>
#include <gpumem/frame/data_frame.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::frame {
namespace {

// A new accessor with f(column) for every column, labels and order kept.
template <class F>
column_accessor map_columns(column_accessor const& in, F f) {
  std::vector<std::pair<label, column>> out;
  out.reserve(in.size());
  for (std::size_t p = 0; p < in.size(); ++p)
    out.emplace_back(in.label_at(p), f(in.at(p)));
  return column_accessor(std::move(out));
}

}  // namespace

data_frame::data_frame(column_accessor columns, std::optional<frame::index> idx)
    : columns_(std::move(columns)),
      index_(idx ? std::move(*idx) : frame::index(range_index(columns_.rows()))) {
  GPUMEM_EXPECTS(columns_.empty() || columns_.rows() == index_.size(),
                 "data_frame: the index has " + std::to_string(index_.size()) +
                     " labels for columns of " + std::to_string(columns_.rows()) + " rows");
}

series data_frame::operator[](label const& key) const {
  return series(columns_.at(key), index_, key);
}

data_frame data_frame::select(std::vector<label> const& keys) const {
  return data_frame(columns_.select(keys), index_);
}

data_frame data_frame::select_prefix(label const& prefix) const {
  return data_frame(columns_.select_prefix(prefix), index_);
}

void data_frame::insert(label key, column c, std::optional<std::size_t> position) {
  GPUMEM_EXPECTS(c.size() == rows(), "data_frame::insert: the column " + key.to_string() + " has " +
                                         std::to_string(c.size()) + " rows; the frame has " +
                                         std::to_string(rows()));
  columns_.insert(std::move(key), std::move(c), position);
}

void data_frame::set(label const& key, column c) {
  GPUMEM_EXPECTS(c.size() == rows(), "data_frame::set: the column " + key.to_string() + " has " +
                                         std::to_string(c.size()) + " rows; the frame has " +
                                         std::to_string(rows()));
  columns_.set(key, std::move(c));
}

void data_frame::set_index(frame::index idx) {
  GPUMEM_EXPECTS(idx.size() == rows(), "data_frame::set_index: the index has " +
                                           std::to_string(idx.size()) + " labels; the frame has " +
                                           std::to_string(rows()) + " rows");
  index_ = std::move(idx);
}

void data_frame::check_rows(std::size_t begin, std::size_t end) const {
  GPUMEM_EXPECTS(begin <= end && end <= rows(),
                 "data_frame: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") are outside the frame of " + std::to_string(rows()) + " rows");
}

data_frame data_frame::slice(std::size_t begin, std::size_t end) const {
  check_rows(begin, end);
  return data_frame(map_columns(columns_, [&](column const& c) { return c.slice(begin, end); }),
                    index_.slice(begin, end));
}

data_frame data_frame::head(std::size_t n) const {
  return slice(0, std::min(n, rows()));
}

data_frame data_frame::tail(std::size_t n) const {
  return slice(rows() - std::min(n, rows()), rows());
}

data_frame data_frame::copy(bool deep) const {
  if (!deep) return *this;
  return data_frame(map_columns(columns_, [](column const& c) { return c.copy(); }),
                    index_.copy(true));
}

void data_frame::write(label const& key, std::size_t begin, column const& rows) {
  std::size_t const p = columns_.position_of(key);
  // Take the column out of the accessor so that the accessor's handles do not count as other
  // slices of its copy-on-write buffers (write_rows writes in place when no other handle lives).
  column target = columns_.pop(key);
  try {
    write_rows(target, begin, rows);
  } catch (...) {
    columns_.insert(key, std::move(target), p);
    throw;
  }
  columns_.insert(key, std::move(target), p);
}

std::vector<labelled_scalar> data_frame::reduce_numeric(reduction op) const {
  std::vector<labelled_scalar> out;
  for (std::size_t p = 0; p < columns_.size(); ++p)
    if (is_numeric(columns_.at(p).type()))
      out.push_back({columns_.label_at(p), reduce(columns_.at(p), op)});
  return out;
}

data_frame data_frame::cumsum() const {
  std::vector<std::pair<label, column>> out;
  for (std::size_t p = 0; p < columns_.size(); ++p)
    if (is_numeric(columns_.at(p).type()))
      out.emplace_back(columns_.label_at(p), frame::cumsum(columns_.at(p)));
  return data_frame(column_accessor(std::move(out)), index_);
}

std::string data_frame::to_string(print_options const& options) const {
  std::size_t const n = rows();
  std::size_t const m = num_columns();
  if (n == 0 || m == 0) {
    std::string out = "Empty DataFrame\nColumns: [";
    for (std::size_t p = 0; p < m; ++p)
      out += (p == 0 ? "" : ", ") + columns_.label_at(p).to_string();
    out += "]\nIndex: [";
    // Past max_rows labels, the first and last min_rows / 2 around "...".
    detail::shown_rows const shown = detail::rows_to_show(n, options, detail::printed::frame);
    std::vector<std::string> labels = index_.format(0, shown.head);
    if (shown.truncated) {
      labels.emplace_back("...");
      for (auto& s : index_.format(n - shown.tail, n))
        labels.push_back(std::move(s));
    }
    for (std::size_t i = 0; i < labels.size(); ++i)
      out += (i == 0 ? "" : ", ") + labels[i];
    return out + "]";
  }
  detail::shown_rows const shown = detail::rows_to_show(n, options, detail::printed::frame);
  auto gather = [&](auto const& format) {
    std::vector<std::string> cells = format(0, shown.head);
    if (shown.truncated) {
      cells.emplace_back();  // the dots, once the width is known
      for (auto& s : format(n - shown.tail, n))
        cells.push_back(std::move(s));
    }
    return cells;
  };
  auto dots = [](std::size_t width) { return std::string(width > 3 ? "..." : ".."); };
  std::vector<std::string> const labels =
      gather([&](std::size_t b, std::size_t e) { return index_.format(b, e); });
  std::size_t label_width = 0;
  for (auto const& s : labels)
    label_width = std::max(label_width, detail::display_width(s));
  if (shown.truncated) label_width = std::max<std::size_t>(label_width, 2);

  // Header lines, one per level; a level's text is left out where the column's labels up to that
  // level are those of the column before (pandas' sparsified hierarchical headers).
  std::size_t const levels = columns_.levels();
  std::vector<std::vector<std::string>> header(levels, std::vector<std::string>(m));
  for (std::size_t p = 0; p < m; ++p) {
    label const& l = columns_.label_at(p);
    for (std::size_t level = 0; level < levels; ++level) {
      bool same = p > 0;
      for (std::size_t k = 0; same && k <= level; ++k)
        same = columns_.label_at(p - 1)[k] == l[k];
      if (!same || levels == 1) header[level][p] = l[level];
    }
    // pandas gives the label of a numeric column a leading space, as its values (flat labels only)
    if (levels == 1 && is_numeric(columns_.at(p).type())) header[0][p] = " " + header[0][p];
  }
  std::vector<std::vector<std::string>> cells(m);
  std::vector<std::size_t> widths(m, 0);
  for (std::size_t p = 0; p < m; ++p) {
    column const& c = columns_.at(p);
    cells[p] = gather([&](std::size_t b, std::size_t e) { return format_rows(c, b, e); });
    // One label per printed row; the rows below index every column's cells by label position.
    GPUMEM_EXPECTS(cells[p].size() == labels.size(),
                   "data_frame::to_string: the index gave " + std::to_string(labels.size()) +
                       " labels for " + std::to_string(cells[p].size()) +
                       " printed rows of column " + columns_.label_at(p).to_string());
    for (auto const& s : cells[p])
      widths[p] = std::max(widths[p], detail::display_width(s) + 1);  // pandas' leading space
    for (std::size_t level = 0; level < levels; ++level)
      widths[p] = std::max(widths[p], detail::display_width(header[level][p]));
    if (shown.truncated) cells[p][shown.head] = dots(widths[p]);
  }
  std::string out;
  for (std::size_t level = 0; level < levels; ++level) {
    out += std::string(label_width, ' ');
    for (std::size_t p = 0; p < m; ++p)
      out += " " + detail::pad_left(header[level][p], widths[p]);
    out += "\n";
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    bool const dots_row = shown.truncated && i == shown.head;
    out += detail::pad_right(dots_row ? dots(label_width) : labels[i], label_width);
    for (std::size_t p = 0; p < m; ++p)
      out += " " + detail::pad_left(cells[p][i], widths[p]);
    if (i + 1 < labels.size()) out += "\n";
  }
  if (shown.truncated)
    out += "\n\n[" + std::to_string(n) + " rows x " + std::to_string(m) + " columns]";
  return out;
}

std::ostream& operator<<(std::ostream& out, data_frame const& df) {
  return out << df.to_string();
}

}  // namespace gpumem::frame
