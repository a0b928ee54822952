// column_accessor (see column_accessor.hpp): labels and columns in two parallel vectors, and a map
// from label to position rebuilt after every change of positions.
#include <gpumem/core/error.hpp>
#include <gpumem/frame/column_accessor.hpp>

#include <set>
#include <string>
#include <utility>

namespace gpumem::frame {

column_accessor::column_accessor(std::vector<std::pair<label, column>> columns) {
  for (auto& [key, c] : columns)
    insert(std::move(key), std::move(c));
}

void column_accessor::missing(label const& key, char const* what) const {
  std::string known;
  for (std::size_t i = 0; i < labels_.size() && i < 10; ++i)
    known += (i == 0 ? "" : ", ") + labels_[i].to_string();
  if (labels_.size() > 10) known += ", ...";
  throw logic_error(std::string(what) + ": no column labelled " + key.to_string() + " (columns: [" +
                    known + "])");
}

std::size_t column_accessor::position_of(label const& key) const {
  auto const it = positions_.find(key);
  if (it == positions_.end()) missing(key, "column_accessor");
  return it->second;
}

column const& column_accessor::at(label const& key) const {
  return columns_[position_of(key)];
}

column const& column_accessor::at(std::size_t position) const {
  GPUMEM_EXPECTS(position < columns_.size(), "column_accessor: position " +
                                                 std::to_string(position) + " is past the " +
                                                 std::to_string(columns_.size()) + " columns");
  return columns_[position];
}

label const& column_accessor::label_at(std::size_t position) const {
  at(position);
  return labels_[position];
}

column_accessor column_accessor::select(std::vector<label> const& keys) const {
  column_accessor out;
  for (label const& key : keys) {
    GPUMEM_EXPECTS(!out.contains(key),
                   "column_accessor::select: " + key.to_string() + " is selected twice");
    out.insert(key, at(key));
  }
  return out;
}

column_accessor column_accessor::select_positions(std::vector<std::size_t> const& positions) const {
  column_accessor out;
  for (std::size_t p : positions) {
    column const& c = at(p);
    GPUMEM_EXPECTS(!out.contains(labels_[p]), "column_accessor::select_positions: position " +
                                                  std::to_string(p) + " is selected twice");
    out.insert(labels_[p], c);
  }
  return out;
}

column_accessor column_accessor::select_range(std::size_t begin, std::size_t end) const {
  GPUMEM_EXPECTS(begin <= end && end <= columns_.size(),
                 "column_accessor::select_range: positions [" + std::to_string(begin) + ", " +
                     std::to_string(end) + ") are outside the " + std::to_string(columns_.size()) +
                     " columns");
  column_accessor out;
  for (std::size_t p = begin; p < end; ++p)
    out.insert(labels_[p], columns_[p]);
  return out;
}

column_accessor column_accessor::select_prefix(label const& prefix) const {
  GPUMEM_EXPECTS(!prefix.empty() && prefix.levels() <= levels_,
                 "column_accessor::select_prefix: the prefix " + prefix.to_string() + " has " +
                     std::to_string(prefix.levels()) + " levels; the labels have " +
                     std::to_string(levels_));
  bool const drop = prefix.levels() < levels_;
  column_accessor out;
  for (std::size_t p = 0; p < labels_.size(); ++p) {
    if (!labels_[p].starts_with(prefix)) continue;
    out.insert(drop ? labels_[p].drop_front(prefix.levels()) : labels_[p], columns_[p]);
  }
  if (out.empty()) missing(prefix, "column_accessor::select_prefix");
  return out;
}

void column_accessor::check_new_label(label const& key) const {
  GPUMEM_EXPECTS(!key.empty(), "column_accessor: a column label needs at least one level");
  GPUMEM_EXPECTS(!contains(key),
                 "column_accessor: a column labelled " + key.to_string() + " exists already");
  GPUMEM_EXPECTS(columns_.empty() || key.levels() == levels_,
                 "column_accessor: the label " + key.to_string() + " has " +
                     std::to_string(key.levels()) + " levels; the others have " +
                     std::to_string(levels_));
}

void column_accessor::check_rows(label const& key, column const& c) const {
  GPUMEM_EXPECTS(columns_.empty() || c.size() == rows_,
                 "column_accessor: the column " + key.to_string() + " has " +
                     std::to_string(c.size()) + " rows; the others have " + std::to_string(rows_));
}

void column_accessor::insert(label key, column c, std::optional<std::size_t> position) {
  check_new_label(key);
  check_rows(key, c);
  std::size_t const at_position = position.value_or(columns_.size());
  GPUMEM_EXPECTS(at_position <= columns_.size(), "column_accessor::insert: position " +
                                                     std::to_string(at_position) + " is past the " +
                                                     std::to_string(columns_.size()) + " columns");
  if (columns_.empty()) {
    rows_ = c.size();
    levels_ = key.levels();
  }
  auto const offset = static_cast<std::ptrdiff_t>(at_position);
  labels_.insert(labels_.begin() + offset, std::move(key));
  columns_.insert(columns_.begin() + offset, std::move(c));
  reindex();
}

void column_accessor::set(label const& key, column c) {
  auto const it = positions_.find(key);
  if (it == positions_.end()) {
    insert(key, std::move(c));
    return;
  }
  GPUMEM_EXPECTS(columns_.size() == 1 || c.size() == rows_,
                 "column_accessor: the column " + key.to_string() + " has " +
                     std::to_string(c.size()) + " rows; the others have " + std::to_string(rows_));
  rows_ = c.size();
  columns_[it->second] = std::move(c);
}

column column_accessor::pop(label const& key) {
  std::size_t const p = position_of(key);
  column out = std::move(columns_[p]);
  auto const offset = static_cast<std::ptrdiff_t>(p);
  labels_.erase(labels_.begin() + offset);
  columns_.erase(columns_.begin() + offset);
  if (columns_.empty()) {
    rows_ = 0;
    levels_ = 0;
  }
  reindex();
  return out;
}

void column_accessor::rename(label const& from, label to) {
  std::size_t const p = position_of(from);
  if (to == from) return;
  GPUMEM_EXPECTS(!to.empty() && to.levels() == levels_,
                 "column_accessor::rename: the label " + to.to_string() + " has " +
                     std::to_string(to.levels()) + " levels; the others have " +
                     std::to_string(levels_));
  GPUMEM_EXPECTS(!contains(to), "column_accessor::rename: a column labelled " + to.to_string() +
                                    " exists already");
  labels_[p] = std::move(to);
  reindex();
}

void column_accessor::reindex() {
  positions_.clear();
  for (std::size_t p = 0; p < labels_.size(); ++p)
    positions_.emplace(labels_[p], p);
}

}  // namespace gpumem::frame
