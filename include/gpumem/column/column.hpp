// gpumem/column/column.hpp
//
// column: one column of a table in the Arrow layout — a type, a data buffer, an optional validity
// mask, children, a size and an offset.
//
//   auto c = gpumem::column::from_host(std::vector<std::optional<int>>{1, std::nullopt, 3});
//   c.null_count();                          // 1 (counted once, then cached)
//   auto tail = c.slice(1, 3);               // rows 1 and 2: same buffers, offset 1, no copy
//   auto values = tail.to_host<int>();       // {nullopt, 3}
//
//   column            data buffer                 null mask        children
//   fixed width       size_of(type) bytes a row   1 bit a row      none
//   string            the UTF-8 characters        1 bit a row      [0] offsets (int32 or int64)
//
// Row i of a column is element offset() + i of its buffers (and bit offset() + i of its mask), so
// a slice is a view: it shares the buffers and children and only changes offset and size. A
// strings column's offsets child is never sliced: row i spans characters
// [offsets[offset + i], offsets[offset + i + 1]) — the first offset of a slice may be above 0.
// Columns whose rows are all valid may have no mask (nullable() is false).
//
// Kernels read columns through column_device_view / strings_column_device_view; on the host,
// from_host / to_host move values through the buffer layer's transfers (device memory is never
// read through a pointer on the host). Strings columns are made by strings_column.hpp.
//
// Ownership: copies and slices share the buffers (buffer handles, so over copy-on-write buffers
// they are copy-on-write copies); copy() is the deep copy. A column owns nothing a copy does not
// share. Moving a column leaves the source empty, as column() (int8, 0 rows, no buffers).
// Errors: constructors check that the buffers are large enough and aligned, and
// throw gpumem::logic_error naming the sizes; to_host<T> checks T against the column's type.
// Thread safety: const members may be called from any number of threads at once; the null count
// is computed on first use and cached atomically (two threads may both compute it, with the same
// result), except for an exposed mask (buffer.hpp), which is counted on every use. Assigning to a
// column while another thread reads it is a race, as for any value.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/data_type.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace gpumem {

class column;

namespace detail {
// How a column's elements of C++ type T are stored: bool as one byte holding 0 or 1.
template <class T>
using column_storage_t = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;

// A fixed-width column of `count` elements copied from `values` (host memory holding
// column_storage_t elements), with a mask built from `valid` when it is given.
column fixed_width_from_host(type_id type, void const* values, std::size_t count,
                             std::vector<bool> const* valid, buffer_options const& options);
buffer_options options_of(buffer_memory memory) noexcept;
// Throws logic_error "<what>: the column holds <actual> values, not <asked>" when they differ.
void check_element_type(data_type actual, type_id asked, char const* what);
// A strings column over buffers that are known to be consistent (built by gpumem itself);
// make_strings_column is the checked entry for everyone else.
column unchecked_strings_column(std::size_t size, buffer offsets, type_id offset_type, buffer chars,
                                buffer null_mask, std::optional<std::size_t> null_count);
}  // namespace detail

class column {
 public:
  // An empty int8 column (size 0, no buffers).
  column() noexcept;
  // A fixed-width column of `size` rows over `data` (at least size * size_of(type) bytes, aligned
  // to the element size) and an optional mask (at least bitmask_words(size) words). `null_count`,
  // when given, is trusted (at most `size`; 0 without a mask); otherwise it is counted on first
  // use.
  column(data_type type, std::size_t size, buffer data, buffer null_mask = {},
         std::optional<std::size_t> null_count = std::nullopt);
  column(column const& other);
  column(column&& other) noexcept;
  column& operator=(column const& other);
  column& operator=(column&& other) noexcept;
  ~column();

  data_type type() const noexcept { return type_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // The row of the buffers that is this column's row 0.
  std::size_t offset() const noexcept { return offset_; }
  buffer const& data() const noexcept { return data_; }
  buffer const& null_mask() const noexcept { return null_mask_; }
  std::vector<column> const& children() const noexcept { return children_; }
  // Child `index`; logic_error naming it when there is none.
  column const& child(std::size_t index) const;

  // True when the column has a validity mask (its rows may be null).
  bool nullable() const noexcept { return !null_mask_.empty(); }
  // Null rows among this column's rows (copies the mask's words for those rows to the host once;
  // every time when the mask is exposed: writes through any handle sharing it change it in place).
  std::size_t null_count() const;
  bool has_nulls() const { return null_count() > 0; }

  // Rows [begin, end) as a view sharing the buffers (logic_error when outside the column).
  column slice(std::size_t begin, std::size_t end) const;
  // What a column is made of, moved out by release() and back in by the constructor below: for
  // code that writes through the buffers, so that no other handle of this column counts as a
  // second holder of copy-on-write bytes.
  struct contents {
    data_type type = type_id::int8;
    std::size_t size = 0;
    std::size_t offset = 0;
    buffer data;
    buffer null_mask;
    std::vector<column> children;
  };
  // Moves everything out; the column is empty afterwards.
  contents release() noexcept;
  // A column of the parts, checked over rows [offset, offset + size) (the null count is counted
  // on first use): a fixed-width one as by the constructor above; a strings one must have one
  // child, its int32 or int64 offsets, with offset + size + 1 entries (none when size is 0) that
  // pass make_strings_column's checks for those rows (not negative, never decreasing, within the
  // characters), and a mask large enough. logic_error naming the value otherwise.
  explicit column(contents parts);

  // A deep copy: new buffers (of the same memory, spill manager and copy-on-write option) holding
  // this column's rows. Fixed width: the rows from the mask word that holds row 0 on (the copy's
  // offset is offset() % 32 when there is a mask, else 0). Strings: the offsets and the mask are
  // copied the same way, and the characters are SHARED: strings data is immutable (nothing in
  // gpumem writes a strings column's characters), so a copy never needs its own. A copy of 0
  // rows has no buffers (a strings one: offsets of 0 entries, as make_strings_column allows).
  column copy() const;

  // Fixed-width columns from host values: one row per element, null where an optional is empty.
  // T is a type type_to_id<T>() knows; bool becomes bool8.
  template <class T>
  static column from_host(std::vector<T> const& values,
                          buffer_memory memory = buffer_memory::device) {
    return from_host(values, detail::options_of(memory));
  }
  template <class T>
  static column from_host(std::vector<std::optional<T>> const& values,
                          buffer_memory memory = buffer_memory::device) {
    return from_host(values, detail::options_of(memory));
  }
  // The same in buffers made with `options` (copy-on-write, spill manager).
  template <class T>
  static column from_host(std::vector<T> const& values, buffer_options const& options);
  template <class T>
  static column from_host(std::vector<std::optional<T>> const& values,
                          buffer_options const& options);
  // The rows as host values (empty optionals for null rows). T must match the column's type:
  // otherwise logic_error naming both types.
  template <class T>
  std::vector<std::optional<T>> to_host() const;
  // The rows of a strings column (see strings_column.hpp).
  std::vector<std::optional<std::string>> to_host_strings() const;
  // One flag per row: true where the row is valid.
  std::vector<bool> validity_to_host() const;

 private:
  static constexpr std::size_t unknown_null_count = ~std::size_t{0};
  // The cached null count, or unknown_null_count when there is none or the mask is exposed.
  std::size_t known_null_count() const noexcept;
  column(data_type type, std::size_t size, std::size_t offset, buffer data, buffer null_mask,
         std::vector<column> children, std::size_t null_count) noexcept;
  friend column detail::unchecked_strings_column(std::size_t, buffer, type_id, buffer, buffer,
                                                 std::optional<std::size_t>);
  // The bytes of rows [offset, offset + size) of a fixed-width column into `dst`.
  void copy_elements_to_host(void* dst) const;

  data_type type_ = type_id::int8;
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
  buffer data_;
  buffer null_mask_;
  std::vector<column> children_;
  mutable std::atomic<std::size_t> null_count_{0};
};

template <class T>
column column::from_host(std::vector<T> const& values, buffer_options const& options) {
  using stored = detail::column_storage_t<T>;
  if constexpr (std::is_same_v<stored, T>) {
    return detail::fixed_width_from_host(type_to_id<T>(), values.data(), values.size(), nullptr,
                                         options);
  } else {
    std::vector<stored> const converted(values.begin(), values.end());
    return detail::fixed_width_from_host(type_to_id<T>(), converted.data(), converted.size(),
                                         nullptr, options);
  }
}

template <class T>
column column::from_host(std::vector<std::optional<T>> const& values,
                         buffer_options const& options) {
  using stored = detail::column_storage_t<T>;
  std::vector<stored> converted(values.size(), stored{});  // null rows hold zeros
  std::vector<bool> valid(values.size(), false);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    converted[i] = static_cast<stored>(*values[i]);
    valid[i] = true;
  }
  return detail::fixed_width_from_host(type_to_id<T>(), converted.data(), converted.size(), &valid,
                                       options);
}

template <class T>
std::vector<std::optional<T>> column::to_host() const {
  detail::check_element_type(type_, type_to_id<T>(), "column::to_host");
  std::vector<detail::column_storage_t<T>> values(size_);
  copy_elements_to_host(values.data());
  std::vector<bool> const valid = validity_to_host();
  std::vector<std::optional<T>> out(size_);
  for (std::size_t i = 0; i < size_; ++i) {
    if (!valid[i]) continue;
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = values[i] != 0;
    } else {
      out[i] = values[i];
    }
  }
  return out;
}

}  // namespace gpumem
