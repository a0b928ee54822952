// Validation and derivation of array layouts (see array_layout.hpp). Every check names the value
// that fails it, because a wrong shape usually comes from far away in the caller's code.
#include <gpumem/array/array_layout.hpp>
#include <gpumem/core/assert.hpp>
#include <gpumem/core/error.hpp>

#include <cstdlib>
#include <sstream>

namespace gpumem {
namespace {

void check_rank(std::size_t rank) {
  GPUMEM_EXPECTS(rank <= static_cast<std::size_t>(max_array_rank),
                 "array rank " + std::to_string(rank) + " exceeds the maximum of " +
                     std::to_string(max_array_rank));
}

// Element count of `shape` times `itemsize`, with every overflow reported. As NumPy's "array is
// too big", the dimensions other than 0 count even when one is 0: strides are products of them
// (contiguous), and slicing computes offsets from them.
void check_total(shape_type const& shape, std::size_t itemsize) {
  GPUMEM_EXPECTS(itemsize > 0, "array itemsize must be positive");
  GPUMEM_EXPECTS(itemsize <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()),
                 "array itemsize " + std::to_string(itemsize) + " exceeds the address space");
  std::size_t bytes = itemsize;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::size_t const n = shape[d];
    GPUMEM_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()),
                   "bad shape " + to_string(shape) + ": shape[" + std::to_string(d) +
                       "] = " + std::to_string(n) + " is too large (negative value converted?)");
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) continue;
    GPUMEM_EXPECTS(
        bytes <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / shape[d],
        "bad shape " + to_string(shape) + ": the array would exceed the address space");
    bytes *= shape[d];
  }
}

// Whether `view` (a layout placed `byte_offset` bytes from `parent`'s origin) addresses only bytes
// that `parent` addresses: a slice or a selection never reaches outside its array.
bool inside(array_layout const& parent, array_layout::derived const& view) {
  if (view.layout.size() == 0) return true;
  auto const p = parent.extent();
  auto const v = view.layout.extent();
  return view.byte_offset + v.lowest >= p.lowest && view.byte_offset + v.highest <= p.highest;
}

}  // namespace

std::string to_string(shape_type const& shape) {
  std::ostringstream out;
  out << '(';
  for (std::size_t d = 0; d < shape.size(); ++d)
    out << (d ? ", " : "") << shape[d];
  if (shape.size() == 1) out << ',';
  out << ')';
  return out.str();
}

array_layout array_layout::contiguous(shape_type const& shape, std::size_t itemsize,
                                      array_order order) {
  check_rank(shape.size());
  check_total(shape, itemsize);
  array_layout l;
  l.rank = static_cast<int>(shape.size());
  l.itemsize = itemsize;
  std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(itemsize);
  for (int i = 0; i < l.rank; ++i) {
    int const d = order == array_order::c ? l.rank - 1 - i : i;
    l.shape[d] = shape[d];
    l.strides[d] = stride;
    stride *= static_cast<std::ptrdiff_t>(shape[d] == 0 ? 1 : shape[d]);
  }
  return l;
}

array_layout array_layout::strided(shape_type const& shape, strides_type const& strides,
                                   std::size_t itemsize) {
  check_rank(shape.size());
  check_total(shape, itemsize);
  GPUMEM_EXPECTS(strides.size() == shape.size(), "bad strides: " + std::to_string(strides.size()) +
                                                     " strides for shape " + to_string(shape) +
                                                     " of rank " + std::to_string(shape.size()));
  array_layout l;
  l.rank = static_cast<int>(shape.size());
  l.itemsize = itemsize;
  for (int d = 0; d < l.rank; ++d) {
    // |PTRDIFF_MIN| is not a ptrdiff_t: no extent could be computed from it.
    GPUMEM_EXPECTS(strides[d] != std::numeric_limits<std::ptrdiff_t>::min(),
                   "bad stride: strides[" + std::to_string(d) + "] = " +
                       std::to_string(strides[d]) + " bytes has no magnitude in ptrdiff_t");
    GPUMEM_EXPECTS(strides[d] % static_cast<std::ptrdiff_t>(itemsize) == 0,
                   "bad stride: strides[" + std::to_string(d) +
                       "] = " + std::to_string(strides[d]) +
                       " bytes is not a multiple of the itemsize " + std::to_string(itemsize));
    l.shape[d] = shape[d];
    l.strides[d] = strides[d];
  }
  // The extent must be representable: |stride| * (n - 1) summed over dimensions. Checked for
  // empty shapes too (a dimension of 0 reaches nothing), as check_total checks their other
  // dimensions: slicing an empty array computes offsets and strides from those.
  std::size_t span = itemsize;
  for (int d = 0; d < l.rank; ++d) {
    std::size_t const step = static_cast<std::size_t>(std::llabs(strides[d]));
    std::size_t const reach = shape[d] == 0 ? 0 : shape[d] - 1;
    GPUMEM_EXPECTS(reach == 0 || step <= (std::numeric_limits<std::size_t>::max() / 4) / reach,
                   "bad stride: strides[" + std::to_string(d) + "] = " +
                       std::to_string(strides[d]) + " overflows for shape " + to_string(shape));
    span += step * reach;
    GPUMEM_EXPECTS(span <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()),
                   "bad strides for shape " + to_string(shape) + ": the extent overflows");
  }
  return l;
}

bool array_layout::is_c_contiguous() const noexcept {
  if (size() == 0) return true;
  std::ptrdiff_t expected = static_cast<std::ptrdiff_t>(itemsize);
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return true;
}

bool array_layout::is_f_contiguous() const noexcept {
  if (size() == 0) return true;
  std::ptrdiff_t expected = static_cast<std::ptrdiff_t>(itemsize);
  for (int d = 0; d < rank; ++d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return true;
}

array_order array_layout::natural_order() const noexcept {
  return is_f_contiguous() && !is_c_contiguous() ? array_order::fortran : array_order::c;
}

array_layout::byte_extent array_layout::extent() const noexcept {
  if (size() == 0) return {};
  byte_extent e{0, static_cast<std::ptrdiff_t>(itemsize)};
  for (int d = 0; d < rank; ++d) {
    std::ptrdiff_t const reach = strides[d] * static_cast<std::ptrdiff_t>(shape[d] - 1);
    if (reach < 0)
      e.lowest += reach;
    else
      e.highest += reach;
  }
  return e;
}

array_layout::derived array_layout::sliced(std::vector<slice> const& slices) const {
  GPUMEM_EXPECTS(slices.size() <= static_cast<std::size_t>(rank),
                 std::to_string(slices.size()) + " slices for an array of rank " +
                     std::to_string(rank) + " (" + describe() + ")");
  derived out{*this, 0};
  bool empty = false;  // a dimension was sliced to nothing
  for (std::size_t d = 0; d < slices.size(); ++d) {
    slice const s = slices[d];
    auto const n = static_cast<std::ptrdiff_t>(shape[d]);
    std::ptrdiff_t const stop = s.stop == slice::end ? n : s.stop;
    std::string const where = "slice [" + std::to_string(s.start) + ", " +
                              (s.stop == slice::end ? std::string("end") : std::to_string(s.stop)) +
                              ") step " + std::to_string(s.step) + " of dimension " +
                              std::to_string(d) + " (length " + std::to_string(n) + ")";
    GPUMEM_EXPECTS(s.step != 0, "bad " + where + ": step is 0");
    GPUMEM_EXPECTS(s.step != std::numeric_limits<std::ptrdiff_t>::min(),
                   "bad " + where + ": the step has no magnitude in ptrdiff_t");
    GPUMEM_EXPECTS(s.start >= 0 && s.start <= stop && stop <= n, "out-of-range " + where);
    std::ptrdiff_t const step = s.step < 0 ? -s.step : s.step;
    // ceil(length / step) without adding to the length (a step near PTRDIFF_MAX would wrap it).
    std::ptrdiff_t const length = stop - s.start;
    std::ptrdiff_t const count = length == 0 ? 0 : (length - 1) / step + 1;
    out.layout.shape[d] = static_cast<std::size_t>(count);
    // With two or more elements, step * stride stays inside the array's extent; with fewer the
    // stride is never used, and multiplying by a huge step could overflow.
    std::ptrdiff_t const stride = count > 1 ? strides[d] * step : strides[d];
    out.layout.strides[d] = s.step > 0 ? stride : -stride;
    // An empty part has byte offset 0 (below), so the offset of an empty range is never formed:
    // its start may be the dimension's length, one element past the extent, and start * stride
    // (summed over such dimensions) could overflow. A non-empty range starts inside the extent.
    if (count == 0) {
      empty = true;
      continue;
    }
    // Forwards from the range's first element, backwards from its last.
    if (!empty) out.byte_offset += (s.step > 0 ? s.start : stop - 1) * strides[d];
  }
  if (empty || out.layout.size() == 0) out.byte_offset = 0;
  GPUMEM_ASSERT(inside(*this, out), "a slice addresses only bytes of its array");
  return out;
}

array_layout::derived array_layout::selected(int dim, std::size_t index) const {
  GPUMEM_EXPECTS(dim >= 0 && dim < rank, "dimension " + std::to_string(dim) +
                                             " out of range for an array of rank " +
                                             std::to_string(rank));
  GPUMEM_EXPECTS(index < shape[dim], "index " + std::to_string(index) +
                                         " out of range for dimension " + std::to_string(dim) +
                                         " of length " + std::to_string(shape[dim]));
  derived out{array_layout{}, static_cast<std::ptrdiff_t>(index) * strides[dim]};
  out.layout.itemsize = itemsize;
  for (int d = 0; d < rank; ++d) {
    if (d == dim) continue;
    out.layout.shape[out.layout.rank] = shape[d];
    out.layout.strides[out.layout.rank] = strides[d];
    ++out.layout.rank;
  }
  GPUMEM_ASSERT(inside(*this, out), "a selection addresses only bytes of its array");
  return out;
}

array_layout array_layout::reshaped(shape_type const& new_shape, array_order order) const {
  array_layout const target = contiguous(new_shape, itemsize, order);
  GPUMEM_EXPECTS(target.size() == size(), "cannot reshape " + describe() + " (" +
                                              std::to_string(size()) + " elements) to shape " +
                                              to_string(new_shape) + " (" +
                                              std::to_string(target.size()) + " elements)");
  bool const ok = order == array_order::c ? is_c_contiguous() : is_f_contiguous();
  GPUMEM_EXPECTS(ok, std::string("cannot reshape a non-contiguous array (") + describe() + ") in " +
                         (order == array_order::c ? "C" : "Fortran") +
                         " order; copy it to a contiguous array first");
  return target;
}

std::string array_layout::describe() const {
  std::ostringstream out;
  out << "shape " << to_string(shape_vector()) << ", strides (";
  for (int d = 0; d < rank; ++d)
    out << (d ? ", " : "") << strides[d];
  if (rank == 1) out << ',';
  out << ") bytes, itemsize " << itemsize;
  return out.str();
}

}  // namespace gpumem
