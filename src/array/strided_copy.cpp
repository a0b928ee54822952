// Element copies between two layouts of the same shape (see detail/strided_copy.hpp), and the
// bounds check of arrays placed on existing memory (detail/array_base.hpp).
#include <gpumem/array/detail/array_base.hpp>
#include <gpumem/array/detail/strided_copy.hpp>
#include <gpumem/core/assert.hpp>
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace gpumem::detail {

void check_fits(array_layout const& layout, std::size_t offset, std::size_t bytes,
                char const* what) {
  auto const e = layout.extent();
  if (layout.size() == 0) return;
  // In unsigned terms, so that no offset (up to SIZE_MAX) can overflow the comparison:
  // offset + lowest >= 0 and offset + highest <= bytes, with lowest <= 0 <= highest.
  auto const below = static_cast<std::size_t>(-e.lowest);
  auto const above = static_cast<std::size_t>(e.highest);
  if (offset >= below && offset <= bytes && above <= bytes - offset) return;
  std::string const lo =
      offset >= below ? std::to_string(offset - below) : "-" + std::to_string(below - offset);
  std::size_t end = 0;
  std::string const hi = checked_add(offset, above, end) ? std::to_string(end) : "beyond 2^64";
  GPUMEM_EXPECTS(false, std::string(what) + ": an array of " + layout.describe() +
                            " at byte offset " + std::to_string(offset) + " reaches bytes [" + lo +
                            ", " + hi + ") outside the buffer of " + std::to_string(bytes) +
                            " bytes");
}

namespace {

bool same_shape(array_layout const& a, array_layout const& b) {
  if (a.rank != b.rank || a.itemsize != b.itemsize) return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d]) return false;
  return true;
}

}  // namespace

void check_same_shape(array_layout const& dst_layout, array_layout const& src_layout) {
  GPUMEM_EXPECTS(same_shape(dst_layout, src_layout),
                 "copy between arrays of different shapes: destination " + dst_layout.describe() +
                     ", source " + src_layout.describe());
}

bool extents_overlap(void const* a, array_layout const& a_layout, void const* b,
                     array_layout const& b_layout) noexcept {
  if (a_layout.size() == 0 || b_layout.size() == 0) return false;
  // [address + lowest, address + highest) in unsigned arithmetic (lowest <= 0 <= highest).
  auto const bounds = [](void const* p, array_layout const& l) {
    auto const e = l.extent();
    auto const at = reinterpret_cast<std::uintptr_t>(p);
    return std::pair<std::uintptr_t, std::uintptr_t>{at - static_cast<std::uintptr_t>(-e.lowest),
                                                     at + static_cast<std::uintptr_t>(e.highest)};
  };
  auto const [a_low, a_high] = bounds(a, a_layout);
  auto const [b_low, b_high] = bounds(b, b_layout);
  return a_low < b_high && b_low < a_high;
}

void copy_elements(void* dst, array_layout const& dst_layout, void const* src,
                   array_layout const& src_layout, copy_mode mode, stream_handle stream) {
  check_same_shape(dst_layout, src_layout);
  GPUMEM_ASSERT(!extents_overlap(dst, dst_layout, src, src_layout),
                "overlapping copies are staged by detail::transfer");
  std::size_t const total = dst_layout.size();
  if (total == 0) return;
  device_backend& b = backend();
  auto copy_bytes = [&](std::ptrdiff_t dst_off, std::ptrdiff_t src_off, std::size_t bytes) {
    void* d = static_cast<unsigned char*>(dst) + dst_off;
    void const* s = static_cast<unsigned char const*>(src) + src_off;
    if (mode == copy_mode::asynchronous)
      b.copy_async(d, s, bytes, stream);
    else
      b.copy(d, s, bytes);
  };

  // Dimensions of size 1 never affect addresses; order the rest fastest first. The order follows
  // the destination (a dense host buffer's order when copying to the host, the device array's
  // when copying to the device) so that at least one side is walked sequentially.
  int dims[max_array_rank];
  int rank = 0;
  bool const fortran = dst_layout.natural_order() == array_order::fortran;
  for (int i = 0; i < dst_layout.rank; ++i) {
    int const d = fortran ? i : dst_layout.rank - 1 - i;
    if (dst_layout.shape[d] != 1) dims[rank++] = d;
  }

  // Merge the fastest dimensions while both layouts stay dense across them.
  auto const item = static_cast<std::ptrdiff_t>(dst_layout.itemsize);
  std::ptrdiff_t run_elems = 1;
  int merged = 0;
  while (merged < rank) {
    int const d = dims[merged];
    if (dst_layout.strides[d] != item * run_elems || src_layout.strides[d] != item * run_elems)
      break;
    run_elems *= static_cast<std::ptrdiff_t>(dst_layout.shape[d]);
    ++merged;
  }
  std::size_t const run_bytes = static_cast<std::size_t>(run_elems * item);
  if (merged == rank) {
    copy_bytes(0, 0, run_bytes);
    return;
  }

  // Odometer over the remaining dimensions (fastest first).
  std::size_t index[max_array_rank] = {};
  std::ptrdiff_t dst_off = 0;
  std::ptrdiff_t src_off = 0;
  std::size_t runs = 0;
  for (;;) {
    copy_bytes(dst_off, src_off, run_bytes);
    ++runs;
    int k = merged;
    for (; k < rank; ++k) {
      int const d = dims[k];
      if (++index[d] < dst_layout.shape[d]) {
        dst_off += dst_layout.strides[d];
        src_off += src_layout.strides[d];
        break;
      }
      auto const back = static_cast<std::ptrdiff_t>(dst_layout.shape[d] - 1);
      dst_off -= back * dst_layout.strides[d];
      src_off -= back * src_layout.strides[d];
      index[d] = 0;
    }
    if (k == rank) break;
  }
  GPUMEM_ASSERT(dst_off == 0 && src_off == 0 && runs * static_cast<std::size_t>(run_elems) == total,
                "the odometer visits every element once and ends where it began");
}

}  // namespace gpumem::detail
