// range_index and index (see range_index.hpp, index.hpp).
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/frame/column_ops.hpp>
#include <gpumem/frame/format.hpp>
#include <gpumem/frame/index.hpp>
#include <gpumem/frame/range_index.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gpumem::frame {

range_index::range_index(std::size_t size) : stop_(static_cast<std::int64_t>(size)) {
  GPUMEM_EXPECTS(size <= static_cast<std::size_t>(INT64_MAX),
                 "range_index: " + std::to_string(size) + " rows do not fit int64 labels");
}

range_index::range_index(std::int64_t start, std::int64_t stop, std::int64_t step)
    : start_(start), stop_(stop), step_(step) {
  GPUMEM_EXPECTS(step != 0, "range_index: the step must not be 0 (start " + std::to_string(start) +
                                ", stop " + std::to_string(stop) + ")");
}

namespace {
std::size_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept {
  return static_cast<std::size_t>(a / b + (a % b != 0 ? 1 : 0));
}
}  // namespace

std::size_t range_index::size() const noexcept {
  // In unsigned arithmetic: stop - start may not fit int64, nor span + step - 1 uint64.
  if (step_ > 0) {
    if (stop_ <= start_) return 0;
    auto const span = static_cast<std::uint64_t>(stop_) - static_cast<std::uint64_t>(start_);
    return ceil_div(span, static_cast<std::uint64_t>(step_));
  }
  if (stop_ >= start_) return 0;
  auto const span = static_cast<std::uint64_t>(start_) - static_cast<std::uint64_t>(stop_);
  return ceil_div(span, static_cast<std::uint64_t>(0) - static_cast<std::uint64_t>(step_));
}

std::int64_t range_index::value(std::size_t position) const {
  GPUMEM_EXPECTS(position < size(), "range_index: position " + std::to_string(position) +
                                        " is past the " + std::to_string(size()) + " labels");
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(start_) +
                                   static_cast<std::uint64_t>(position) *
                                       static_cast<std::uint64_t>(step_));
}

range_index range_index::slice(std::size_t begin, std::size_t end) const {
  std::size_t const n = size();
  GPUMEM_EXPECTS(begin <= end && end <= n, "range_index::slice: [" + std::to_string(begin) + ", " +
                                               std::to_string(end) + ") is outside the " +
                                               std::to_string(n) + " labels");
  if (begin == end) {
    std::int64_t const first = begin < n ? value(begin) : start_;
    return range_index(first, first, step_);
  }
  // The new stop is one step past the last label (pandas' slice stop), or the int64 limit in the
  // step's direction when that does not fit: start + end * step used to wrap near INT64_MAX/MIN
  // and make the slice empty. Every label lies strictly before this range's stop in the step's
  // direction (last < stop <= INT64_MAX for a positive step), so the limit is past the last label
  // and within one step of it: the labels are the same.
  constexpr std::int64_t top = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t bottom = std::numeric_limits<std::int64_t>::min();
  std::int64_t const last = value(end - 1);
  std::int64_t stop = 0;
  if (step_ > 0)
    stop = last <= top - step_ ? last + step_ : top;
  else
    stop = last >= bottom - step_ ? last + step_ : bottom;
  return range_index(value(begin), stop, step_);
}

column range_index::to_column() const {
  // More labels than any allocation holds (range_index(INT64_MIN, INT64_MAX) has 2^64 - 1): refused
  // by value, before the host vector would fail with std::length_error.
  std::size_t const n = size();
  GPUMEM_EXPECTS(n <= max_allocation_bytes / sizeof(std::int64_t),
                 "range_index::to_column: " + std::to_string(n) + " labels of " +
                     std::to_string(sizeof(std::int64_t)) + " bytes exceed the address space");
  std::vector<std::int64_t> values(n);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = value(i);
  return column::from_host(values);
}

std::size_t index::size() const noexcept {
  if (auto const* r = std::get_if<range_index>(&labels_)) return r->size();
  return std::get<column>(labels_).size();
}

range_index const& index::range() const {
  auto const* r = std::get_if<range_index>(&labels_);
  GPUMEM_EXPECTS(r != nullptr, "index::range: the index is a column of labels, not a range");
  return *r;
}

column const& index::labels() const {
  auto const* c = std::get_if<column>(&labels_);
  GPUMEM_EXPECTS(c != nullptr, "index::labels: the index is a range_index, not a column");
  return *c;
}

column index::to_column() const {
  return is_range() ? range().to_column() : labels();
}

index index::slice(std::size_t begin, std::size_t end) const {
  if (is_range()) return index(range().slice(begin, end));
  return index(labels().slice(begin, end));
}

index index::copy(bool deep) const {
  if (is_range() || !deep) return *this;
  return index(labels().copy());
}

std::vector<std::string> index::format(std::size_t begin, std::size_t end) const {
  if (!is_range()) return format_rows(labels(), begin, end);
  range_index const r = range().slice(begin, end);
  std::vector<std::string> out;
  out.reserve(r.size());
  for (std::size_t i = 0; i < r.size(); ++i)
    out.push_back(std::to_string(r.value(i)));
  return out;
}

}  // namespace gpumem::frame
