// Making device views of columns (see column_device_view.hpp and strings_column_device_view.hpp).
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/core/error.hpp>

#include <string>
#include <type_traits>

namespace gpumem {

static_assert(std::is_trivially_copyable_v<column_device_view>);
static_assert(std::is_trivially_copyable_v<strings_column_device_view>);
static_assert(std::is_trivially_copyable_v<string_element>);

namespace {
void const* kernel_pointer(buffer const& b, char const* what, char const* name) {
  GPUMEM_EXPECTS(b.empty() || b.memory() != buffer_memory::pinned,
                 std::string(what) + ": the " + name +
                     " buffer is in pinned host memory, which kernels cannot read; copy it to "
                     "device or managed memory first");
  return b.get_ptr(access::read);
}
}  // namespace

column_device_view column_device_view::of(column const& c, char const* what) {
  void const* data = kernel_pointer(c.data(), what, "data");
  auto const* mask =
      static_cast<bitmask_word const*>(kernel_pointer(c.null_mask(), what, "null mask"));
  return column_device_view(c.type().id(), c.size(), c.offset(), data, mask);
}

column_device_view column_device_view::create(column const& c) {
  GPUMEM_EXPECTS(is_fixed_width(c.type()),
                 "column_device_view: a " + to_string(c.type()) +
                     " column has no fixed-width elements (use strings_column_device_view)");
  return of(c, "column_device_view");
}

strings_column_device_view strings_column_device_view::create(column const& strings) {
  char const* what = "strings_column_device_view";
  GPUMEM_EXPECTS(strings.type() == type_id::string, std::string(what) + ": the column holds " +
                                                        to_string(strings.type()) +
                                                        " values, not strings");
  strings_column_device_view v;
  v.rows_ = column_device_view::of(strings, what);
  column const& offsets = strings.child(0);
  v.offset_type_ = offsets.type().id();
  // The offsets child is not sliced in columns gpumem makes; its own offset is honoured anyway.
  v.offsets_ = static_cast<unsigned char const*>(kernel_pointer(offsets.data(), what, "offsets")) +
               offsets.offset() * size_of(offsets.type());
  return v;
}

}  // namespace gpumem
