// frame::write_rows (column_ops.hpp): rows of a fixed-width column written in place, through the
// buffer layer's copy on write, by device code (a functor launched with gpumem::launch, so the
// same code runs as a CUDA kernel and on the host backend's thread pool).
//
// copy_rows_kernel: one thread per destination mask word writes the elements and validity bits of
// the rows of that word (read-modify-write of the partial words at the range's edges). Its threads
// read the source while others write the destination, so the two must not share bytes: a source
// that overlaps the destination (a view of an exposed target, which is written in place) is
// staged first, copied into buffers of its own, as the array layer stages overlapping copies.
// Null rows take only their validity bit: their elements keep what they held (Arrow leaves a null
// row's value unspecified), so a handle sharing exposed data but not the mask (one the write made
// or unshared) sees there the old value, never one that nobody wrote (docs/frame.md); and the data
// of a column whose mask is exposed is exposed too, so that both are written where the mask's
// other handles see them.
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/frame/column_ops.hpp>

#include "launch_shape.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace gpumem::frame {
namespace {

struct copy_rows_kernel {
  column_device_view src;  // rows [0, count)
  void* dst;               // element 0 of the destination buffer
  bitmask_word* dst_mask;  // null when the destination has none
  std::size_t dst_begin;   // destination row of source row 0
  std::size_t count;
  std::size_t width;       // bytes per element
  std::size_t first_word;  // dst_begin / 32

  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const w = first_word + t.global();
    std::size_t const word_begin = w * bitmask_word_bits;
    std::size_t const begin = word_begin > dst_begin ? word_begin : dst_begin;
    std::size_t const word_end = word_begin + bitmask_word_bits;
    std::size_t const end = word_end < dst_begin + count ? word_end : dst_begin + count;
    if (begin >= end) return;
    auto const* from = static_cast<unsigned char const*>(src.head());
    auto* to = static_cast<unsigned char*>(dst);
    bitmask_word word = dst_mask != nullptr ? dst_mask[w] : 0;
    for (std::size_t row = begin; row < end; ++row) {
      std::size_t const s = row - dst_begin;
      bitmask_word const bit = bitmask_word{1} << (row % bitmask_word_bits);
      if (!src.is_valid(s)) {
        word &= ~bit;
        continue;
      }
      word |= bit;
      unsigned char const* a = from + (src.offset() + s) * width;
      unsigned char* b = to + row * width;
      switch (width) {  // typed copies: one load and one store per element
        case 1:
          *b = *a;
          break;
        case 2:
          *reinterpret_cast<std::uint16_t*>(b) = *reinterpret_cast<std::uint16_t const*>(a);
          break;
        case 4:
          *reinterpret_cast<std::uint32_t*>(b) = *reinterpret_cast<std::uint32_t const*>(a);
          break;
        default:
          *reinterpret_cast<std::uint64_t*>(b) = *reinterpret_cast<std::uint64_t const*>(a);
          break;
      }
    }
    if (dst_mask != nullptr) dst_mask[w] = word;
  }
};

// The addresses [p + offset, p + offset + bytes), to compare ranges of any two buffers (one address
// space: host memory on the host backend, unified addressing on the cuda one). Empty when p is
// null.
struct byte_range {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};
byte_range range_of(void const* p, std::size_t offset, std::size_t bytes) {
  if (p == nullptr || bytes == 0) return {};
  std::uintptr_t const begin = reinterpret_cast<std::uintptr_t>(p) + offset;
  return {begin, begin + bytes};
}
bool intersect(byte_range a, byte_range b) {
  return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
}
// The bytes of the mask words holding rows [first, first + count) (count > 0).
byte_range mask_words_of(void const* mask, std::size_t first, std::size_t count) {
  std::size_t const first_word = first / bitmask_word_bits;
  std::size_t const last_word = (first + count - 1) / bitmask_word_bits;
  return range_of(mask, first_word * sizeof(bitmask_word),
                  (last_word - first_word + 1) * sizeof(bitmask_word));
}

// Whether the bytes that copying `values` to rows [begin, ...) of `dst` / `dst_mask` reads share
// any byte with those it writes: the source's elements and mask words against the destination's
// (any pair, so that buffers made by hand over one allocation count too). Inside a spill lock.
bool overlaps(column const& values, void const* dst, void const* dst_mask, std::size_t begin) {
  std::size_t const n = values.size();
  std::size_t const width = size_of(values.type());
  byte_range const writes[] = {
      range_of(dst, begin * width, n * width),
      dst_mask != nullptr ? mask_words_of(dst_mask, begin, n) : byte_range{}};
  void const* const src = values.data().get_ptr(access::read);
  byte_range const reads[] = {
      range_of(src, values.offset() * width, n * width),
      values.nullable()
          ? mask_words_of(values.null_mask().get_ptr(access::read), values.offset(), n)
          : byte_range{}};
  for (byte_range const& w : writes)
    for (byte_range const& r : reads)
      if (intersect(w, r)) return true;
  return false;
}

// Copies rows [0, values.size()) of `values` to rows [begin, ...) of `dst` / `dst_mask`, staging
// the source first when it overlaps the destination. Inside a spill lock.
void copy_rows(column const& values, void* dst, bitmask_word* dst_mask, std::size_t begin) {
  if (values.empty()) return;
  if (overlaps(values, dst, dst_mask, begin)) {
    copy_rows(values.copy(), dst, dst_mask, begin);  // new buffers: no overlap
    return;
  }
  std::size_t const first_word = begin / bitmask_word_bits;
  std::size_t const last_word = (begin + values.size() - 1) / bitmask_word_bits;
  copy_rows_kernel const k{column_device_view::create(values),
                           dst,
                           dst_mask,
                           begin,
                           values.size(),
                           size_of(values.type()),
                           first_word};
  gpumem::launch(detail::covering(last_word - first_word + 1), k);
  detail::synchronize();
}

}  // namespace

void write_rows(column& target, std::size_t begin, column const& values) {
  GPUMEM_EXPECTS(target.type().id() != type_id::string,
                 "write_rows: strings columns cannot be written in place");
  gpumem::detail::check_element_type(target.type(), values.type().id(), "write_rows");
  GPUMEM_EXPECTS(begin <= target.size() && values.size() <= target.size() - begin,
                 "write_rows: rows [" + std::to_string(begin) + ", " + std::to_string(begin) +
                     " + " + std::to_string(values.size()) + ") are outside the column of " +
                     std::to_string(target.size()) + " rows");
  // The copy is a kernel, which reads the values through a column_device_view (refused there if
  // pinned) and writes the target's buffers: pinned host memory is refused for them as well.
  for (buffer const* b : {&target.data(), &target.null_mask()})
    GPUMEM_EXPECTS(b->empty() || b->memory() != buffer_memory::pinned,
                   std::string("write_rows: the target's ") +
                       (b == &target.data() ? "data" : "null mask") +
                       " buffer is in pinned host memory, which kernels cannot write; copy the "
                       "column to device or managed memory first");
  if (values.empty() || &values == &target) return;  // a column written over itself: unchanged
  // Copy on write is the buffer's (docs/buffers.md): the target's handles are moved out, so they
  // are the only ones of this column, and get_ptr(access::write) gives them bytes of their own
  // when any other handle (a shallow copy, a view, another frame) shares them. Buffers that are
  // not copy-on-write are first copied into copy-on-write ones: only the buffer layer can tell
  // whether their bytes are shared (but for the data of a column whose mask is exposed: below).
  column::contents parts = target.release();
  try {
    if (!parts.null_mask.empty() && !parts.null_mask.is_copy_on_write())
      parts.null_mask = parts.null_mask.as_copy_on_write();
    // An exposed mask is written in place, where every handle sharing it sees a row made valid:
    // the data must be written there too, or such a handle would show the value under its old
    // null, which nobody wrote. So the data is exposed with it (copy-on-write data), or kept
    // (other data is written in place as it is), never copied first.
    if (!parts.null_mask.empty() && parts.null_mask.is_exposed()) {
      if (parts.data.is_copy_on_write()) (void)parts.data.expose();
    } else if (!parts.data.is_copy_on_write()) {
      parts.data = parts.data.as_copy_on_write();
    }
    std::size_t const rows = parts.offset + parts.size;
    spill_lock lock;  // the target's and the values' buffers, until the copy is done
    if (parts.null_mask.empty() && values.has_nulls()) {
      buffer_options options;
      options.memory = parts.data.memory();
      options.copy_on_write = true;
      parts.null_mask = buffer(bitmask_allocation_bytes(rows), options);
      backend().fill_async(parts.null_mask.get_ptr(access::write), 0xff, parts.null_mask.size(),
                           stream_handle{});
    }
    void* const data = parts.data.get_ptr(access::write);
    auto* const mask = parts.null_mask.empty()
                           ? nullptr
                           : static_cast<bitmask_word*>(parts.null_mask.get_ptr(access::write));
    copy_rows(values, data, mask, parts.offset + begin);
  } catch (...) {
    target = column(std::move(parts));
    throw;
  }
  target = column(std::move(parts));
}

}  // namespace gpumem::frame
