// gpumem/column/column_device_view.hpp
//
// column_device_view: what a kernel takes to read a fixed-width column — pointers to the data
// and the mask, the offset and the size; trivially copyable, owning nothing.
//
//   struct add_one {
//     gpumem::column_device_view in;
//     std::int32_t* out;
//     GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
//       auto const row = t.global();
//       if (row < in.size() && in.is_valid(row)) out[row] = in.element<std::int32_t>(row) + 1;
//     }
//   };
//   gpumem::launch({blocks, 256, s.handle()}, add_one{gpumem::column_device_view::create(c), out});
//
// Rows are numbered from the column's row 0: the offset of a slice is applied inside. element<T>
// does not check T on the device (device code cannot throw): create() records the type, and
// type() lets a kernel's caller check it first.
//
// create() is host code: it asks the column's buffers for read pointers (buffer::get_ptr) and
// refuses columns in pinned host memory, which kernels cannot read on the cuda backend. The view
// is valid while the column's buffers live: keep the column (or stream::keep_alive its buffers'
// share_owner()) until the kernels using the view have finished.
// Thread safety: a plain value; any number of threads may read one view.
#pragma once

#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/data_type.hpp>
#include <gpumem/core/config.hpp>

#include <cstddef>

namespace gpumem {

class column;

class column_device_view {
 public:
  column_device_view() = default;
  // The view of a fixed-width column (logic_error for a strings column or pinned memory).
  static column_device_view create(column const& c);

  GPUMEM_HD type_id type() const noexcept { return type_; }
  GPUMEM_HD std::size_t size() const noexcept { return size_; }
  GPUMEM_HD std::size_t offset() const noexcept { return offset_; }
  GPUMEM_HD bool nullable() const noexcept { return null_mask_ != nullptr; }
  GPUMEM_HD bool is_valid(std::size_t row) const noexcept {
    return null_mask_ == nullptr || bit_is_set(null_mask_, offset_ + row);
  }
  GPUMEM_HD bool is_null(std::size_t row) const noexcept { return !is_valid(row); }
  // The value of `row` (0 <= row < size()); T must be the column's element type (bool for bool8).
  template <class T>
  GPUMEM_HD T element(std::size_t row) const noexcept {
    return static_cast<T const*>(data_)[offset_ + row];
  }
  // The buffers' first element and mask word (not advanced by the offset).
  GPUMEM_HD void const* head() const noexcept { return data_; }
  GPUMEM_HD bitmask_word const* null_mask() const noexcept { return null_mask_; }

 private:
  friend class strings_column_device_view;
  column_device_view(type_id type, std::size_t size, std::size_t offset, void const* data,
                     bitmask_word const* null_mask) noexcept
      : type_(type), size_(size), offset_(offset), data_(data), null_mask_(null_mask) {}
  // The view of any column, fixed width or not (create() and the strings view check the type).
  static column_device_view of(column const& c, char const* what);

  type_id type_ = type_id::int8;
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
  void const* data_ = nullptr;
  bitmask_word const* null_mask_ = nullptr;
};

}  // namespace gpumem
