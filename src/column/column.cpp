// column (see column.hpp): construction checks, slices, the cached null count and host copies of
// fixed-width columns.
#include "column_checks.hpp"
#include "strings_offsets.hpp"

#include <gpumem/column/column.hpp>
#include <gpumem/column/null_mask.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {

namespace detail {

void check_element_type(data_type actual, type_id asked, char const* what) {
  GPUMEM_EXPECTS(actual == asked, std::string(what) + ": the column holds " + to_string(actual) +
                                      " values, not " + to_string(asked));
}

buffer_options options_of(buffer_memory memory) noexcept {
  buffer_options options;
  options.memory = memory;
  return options;
}

column fixed_width_from_host(type_id type, void const* values, std::size_t count,
                             std::vector<bool> const* valid, buffer_options const& options) {
  std::size_t const width = size_of(type);
  std::size_t bytes = 0;
  GPUMEM_EXPECTS(checked_mul(count, width, bytes), "column::from_host: " + std::to_string(count) +
                                                       " elements of " + std::to_string(width) +
                                                       " bytes exceed the address space");
  buffer data = buffer::from_host(values, bytes, options);
  if (valid == nullptr) return column(type, count, std::move(data), buffer(), 0);
  std::size_t nulls = 0;
  for (std::size_t i = 0; i < count; ++i)
    nulls += (*valid)[i] ? 0 : 1;
  buffer mask = null_mask_from_host(*valid, options);
  return column(type, count, std::move(data), std::move(mask), nulls);
}

}  // namespace detail

column::column() noexcept = default;

column::column(data_type type, std::size_t size, std::size_t offset, buffer data, buffer null_mask,
               std::vector<column> children, std::size_t null_count) noexcept
    : type_(type),
      size_(size),
      offset_(offset),
      data_(std::move(data)),
      null_mask_(std::move(null_mask)),
      children_(std::move(children)),
      null_count_(null_mask_.empty() ? 0 : null_count) {}

column::column(data_type type, std::size_t size, buffer data, buffer null_mask,
               std::optional<std::size_t> null_count)
    : column(type, size, 0, std::move(data), std::move(null_mask), {},
             null_count.value_or(unknown_null_count)) {
  char const* what = "column";
  GPUMEM_EXPECTS(type.id() != type_id::string,
                 std::string(what) + ": string columns are made by make_strings_column");
  GPUMEM_EXPECTS(is_fixed_width(type),
                 std::string(what) + ": " + to_string(type) + " is not a column element type");
  std::size_t const width = size_of(type);
  detail::check_holds(data_, size, width, what, "data");
  detail::check_aligned(data_, width, what, "data");
  detail::check_mask(null_mask_, size, null_count, what);
}

column::column(column const& other)
    : type_(other.type_),
      size_(other.size_),
      offset_(other.offset_),
      data_(other.data_),
      null_mask_(other.null_mask_),
      children_(other.children_),
      null_count_(other.known_null_count()) {}

// A moved-from column is empty, as column(): moving the buffers out but keeping the size would
// leave a handle whose rows reach bytes it no longer has (a device view of it reads null).
column::column(column&& other) noexcept
    : type_(std::exchange(other.type_, type_id::int8)),
      size_(std::exchange(other.size_, 0)),
      offset_(std::exchange(other.offset_, 0)),
      data_(std::move(other.data_)),
      null_mask_(std::move(other.null_mask_)),
      children_(std::move(other.children_)),
      null_count_(other.null_count_.exchange(0, std::memory_order_relaxed)) {
  other.children_.clear();  // a moved-from vector is only "valid but unspecified"
}

column& column::operator=(column const& other) {
  if (this != &other) *this = column(other);
  return *this;
}

column& column::operator=(column&& other) noexcept {
  if (this == &other) return *this;  // c = std::move(c): moving the members out would empty it
  type_ = std::exchange(other.type_, type_id::int8);
  size_ = std::exchange(other.size_, 0);
  offset_ = std::exchange(other.offset_, 0);
  data_ = std::move(other.data_);
  null_mask_ = std::move(other.null_mask_);
  children_ = std::move(other.children_);
  other.children_.clear();
  null_count_.store(other.null_count_.exchange(0, std::memory_order_relaxed),
                    std::memory_order_relaxed);
  return *this;
}

column::~column() = default;

column const& column::child(std::size_t index) const {
  GPUMEM_EXPECTS(index < children_.size(), "column::child: no child " + std::to_string(index) +
                                               " in a column with " +
                                               std::to_string(children_.size()) + " children");
  return children_[index];
}

std::size_t column::known_null_count() const noexcept {
  // An exposed mask is shared for good by every view of it and by the holder of its address, and
  // a write through any of them changes it in place: no handle can keep a count of it.
  if (null_mask_.is_exposed()) return unknown_null_count;
  return null_count_.load(std::memory_order_relaxed);
}

std::size_t column::null_count() const {
  std::size_t cached = known_null_count();
  if (cached != unknown_null_count) return cached;
  cached = detail::count_nulls(null_mask_, offset_, size_);
  if (!null_mask_.is_exposed()) null_count_.store(cached, std::memory_order_relaxed);
  return cached;
}

column column::slice(std::size_t begin, std::size_t end) const {
  GPUMEM_EXPECTS(begin <= end && end <= size_,
                 "column::slice: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") are outside the column of " + std::to_string(size_) + " rows");
  // What is known of the whole column is known of every part when it says "none" or "all".
  std::size_t const known = known_null_count();
  std::size_t nulls = unknown_null_count;
  if (known == 0) nulls = 0;
  if (known == size_ && size_ != 0) nulls = end - begin;
  // Views: buffer slices share the bytes even of an exposed copy-on-write buffer, of which a handle
  // copy is a true copy (docs/buffers.md); the children (a strings column's offsets) likewise.
  auto const view_of = [](buffer const& b) { return b.size() == 0 ? b : b.slice(0, b.size()); };
  std::vector<column> children;
  children.reserve(children_.size());
  for (column const& child : children_)
    children.push_back(child.slice(0, child.size()));
  return column(type_, end - begin, offset_ + begin, view_of(data_), view_of(null_mask_),
                std::move(children), nulls);
}

column::contents column::release() noexcept {
  contents out;
  out.type = type_;
  out.size = std::exchange(size_, 0);
  out.offset = std::exchange(offset_, 0);
  out.data = std::move(data_);
  out.null_mask = std::move(null_mask_);
  out.children = std::move(children_);
  type_ = type_id::int8;
  null_count_.store(0, std::memory_order_relaxed);
  return out;
}

column::column(contents parts)
    : column(parts.type, parts.size, parts.offset, std::move(parts.data),
             std::move(parts.null_mask), std::move(parts.children), unknown_null_count) {
  char const* what = "column";
  std::size_t rows = 0;
  GPUMEM_EXPECTS(checked_add(offset_, size_, rows), std::string(what) + ": offset " +
                                                        std::to_string(offset_) + " and size " +
                                                        std::to_string(size_) + " overflow");
  if (type_.id() == type_id::string) {
    // Device views and host copies read offsets [offset, offset + size] and the characters they
    // span, so those are checked as make_strings_column checks its buffers.
    GPUMEM_EXPECTS(children_.size() == 1, std::string(what) +
                                              ": a strings column has 1 child (its offsets), not " +
                                              std::to_string(children_.size()));
    detail::check_strings_rows(children_[0], offset_, size_, data_, what);
    detail::check_mask(null_mask_, rows, std::nullopt, what);
    return;
  }
  GPUMEM_EXPECTS(children_.empty(), std::string(what) + ": a " + to_string(type_) +
                                        " column has no children, not " +
                                        std::to_string(children_.size()));
  std::size_t const width = size_of(type_);
  detail::check_holds(data_, rows, width, what, "data");
  detail::check_aligned(data_, width, what, "data");
  detail::check_mask(null_mask_, rows, std::nullopt, what);
}

column column::copy() const {
  // Rows are copied from `first`, the row whose mask bit opens a word, so the mask needs no shift.
  std::size_t const first = nullable() ? offset_ - offset_ % bitmask_word_bits : offset_;
  std::size_t const rows = offset_ + size_ - first;
  std::size_t const nulls = known_null_count();
  buffer mask;
  if (nullable() && size_ != 0) {
    // Padded as a new mask is where the source has the bytes (the constructor checked that the
    // words of the rows are there).
    std::size_t const start = first / bitmask_word_bits * sizeof(bitmask_word);
    std::size_t const bytes =
        std::max(bitmask_words(rows) * sizeof(bitmask_word),
                 std::min(bitmask_allocation_bytes(rows), null_mask_.size() - start));
    mask = null_mask_.slice(start, bytes).copy();
  } else if (nullable()) {
    mask = null_mask_.slice(0, 0);
  }
  if (type_.id() == type_id::string) {
    if (children_.empty()) return *this;  // moved from: nothing to copy
    column const& offsets = child(0);
    if (size_ == 0) {
      // No rows: no buffers, as make_strings_column's empty column (its offsets may be empty,
      // and nothing of the characters is needed).
      column const no_offsets(offsets.type(), 0, 0, buffer(), buffer(), {}, 0);
      return column(type_, 0, 0, buffer(), buffer(), {no_offsets}, 0);
    }
    std::size_t const width = size_of(offsets.type());
    buffer const own_offsets =
        offsets.data().slice((offsets.offset() + first) * width, (rows + 1) * width).copy();
    column const offsets_copy(offsets.type(), rows + 1, 0, own_offsets, buffer(), {}, 0);
    return column(type_, size_, offset_ - first, data_, std::move(mask), {offsets_copy}, nulls);
  }
  if (size_ == 0) return column(type_, 0, 0, buffer(), buffer(), {}, 0);  // no rows: no buffers
  std::size_t const width = size_of(type_);
  buffer data = data_.slice(first * width, rows * width).copy();
  return column(type_, size_, offset_ - first, std::move(data), std::move(mask), {}, nulls);
}

std::vector<bool> column::validity_to_host() const {
  std::vector<bool> out(size_, true);
  if (!nullable() || size_ == 0) return out;
  std::vector<bitmask_word> const words = detail::mask_words_to_host(null_mask_, offset_, size_);
  std::size_t const head = offset_ % bitmask_word_bits;
  for (std::size_t i = 0; i < size_; ++i)
    out[i] = bit_is_set(words.data(), head + i);
  return out;
}

void column::copy_elements_to_host(void* dst) const {
  std::size_t const width = size_of(type_);
  // The constructor checked that (offset + size) * width bytes fit in the data buffer.
  data_.slice(offset_ * width, size_ * width).copy_to_host(dst, size_ * width);
}

}  // namespace gpumem
