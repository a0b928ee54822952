// The frame layer's device code (column_ops.hpp): one reduction kernel, one running-sum kernel
// and one row-copy kernel, each a functor launched with gpumem::launch, so the same code runs as
// CUDA kernels and on the host backend's thread pool.
//
// Values are read through an accumulator type chosen by the column's type (acc_kind): int64 for
// signed integers, uint64 for unsigned and bool8, double for floats. The element type is a
// run-time switch inside the kernel (uniform across a launch), which keeps the instantiations to
// three per kernel rather than one per column type.
//
// reduce_kernel: thread t folds rows t, t + T, t + 2T, ... (T threads, coalesced on a GPU) into a
// partial {count, sum, min, max}; later launches fold the partials the same way until one is
// left, which is copied back. The launch shapes depend only on the row count, so the order of
// floating additions does too.
//
// cumsum_kernel: rows are cut into chunks of a multiple of 32 rows (so each thread owns whole mask
// words); phase 0 sums each chunk, phase 1 (one thread) turns the chunk sums into exclusive
// prefixes, phase 2 writes each chunk's running sums from its prefix.
//
// copy_rows_kernel: one thread per destination mask word writes the elements and validity bits of
// the rows of that word (read-modify-write of the partial words at the range's edges).
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/frame/column_ops.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::frame {
namespace {

enum class acc_kind { signed_int, unsigned_int, floating };

acc_kind kind_of(type_id t) {
  switch (t) {
    case type_id::int8:
    case type_id::int16:
    case type_id::int32:
    case type_id::int64:
      return acc_kind::signed_int;
    case type_id::uint8:
    case type_id::uint16:
    case type_id::uint32:
    case type_id::uint64:
    case type_id::bool8:
      return acc_kind::unsigned_int;
    default:
      return acc_kind::floating;
  }
}

// Reads row `row` of `in` as Acc; false for a NaN (skipped like a null).
template <class Acc>
GPUMEM_HD bool load(column_device_view const& in, std::size_t row, Acc& out) {
  switch (in.type()) {
    case type_id::int8:
      out = static_cast<Acc>(in.element<std::int8_t>(row));
      return true;
    case type_id::int16:
      out = static_cast<Acc>(in.element<std::int16_t>(row));
      return true;
    case type_id::int32:
      out = static_cast<Acc>(in.element<std::int32_t>(row));
      return true;
    case type_id::int64:
      out = static_cast<Acc>(in.element<std::int64_t>(row));
      return true;
    case type_id::uint8:
    case type_id::bool8:
      out = static_cast<Acc>(in.element<std::uint8_t>(row));
      return true;
    case type_id::uint16:
      out = static_cast<Acc>(in.element<std::uint16_t>(row));
      return true;
    case type_id::uint32:
      out = static_cast<Acc>(in.element<std::uint32_t>(row));
      return true;
    case type_id::uint64:
      out = static_cast<Acc>(in.element<std::uint64_t>(row));
      return true;
    case type_id::float32: {
      float const v = in.element<float>(row);
      out = static_cast<Acc>(v);
      return v == v;
    }
    case type_id::float64: {
      double const v = in.element<double>(row);
      out = static_cast<Acc>(v);
      return v == v;
    }
    default:
      return false;
  }
}

// Integer sums wrap: added as uint64 (no signed overflow), read back as Acc.
template <class Acc>
GPUMEM_HD Acc add(Acc a, Acc b) {
  if constexpr (std::numeric_limits<Acc>::is_integer) {
    return static_cast<Acc>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
  } else {
    return a + b;
  }
}

template <class Acc>
struct partial {
  unsigned long long count;
  Acc sum;
  Acc min;
  Acc max;

  GPUMEM_HD void add_value(Acc v) {
    if (count == 0) {
      min = v;
      max = v;
    } else {
      min = v < min ? v : min;
      max = v > max ? v : max;
    }
    sum = frame::add(sum, v);
    ++count;
  }
  GPUMEM_HD void add_partial(partial const& p) {
    if (p.count == 0) return;
    if (count == 0) {
      min = p.min;
      max = p.max;
    } else {
      min = p.min < min ? p.min : min;
      max = p.max > max ? p.max : max;
    }
    sum = frame::add(sum, p.sum);
    count += p.count;
  }
};

template <class Acc>
struct reduce_kernel {
  column_device_view in;         // the first pass reads the column ...
  partial<Acc> const* partials;  // ... later passes these (null in the first)
  std::size_t items;             // rows or partials
  partial<Acc>* out;             // one per thread

  GPUMEM_HD void operator()(thread_index const& t) const {
    partial<Acc> p{0, Acc{}, Acc{}, Acc{}};
    for (std::size_t i = t.global(); i < items; i += t.total()) {
      if (partials != nullptr) {
        p.add_partial(partials[i]);
      } else if (in.is_valid(i)) {
        Acc v{};
        if (load<Acc>(in, i, v)) p.add_value(v);
      }
    }
    out[t.global()] = p;
  }
};

// Writes `value` as element `row` of `data`, of type `type` (the cumsum's output type).
template <class Acc>
GPUMEM_HD void store(void* data, type_id type, std::size_t row, Acc value) {
  switch (type) {
    case type_id::float32:
      static_cast<float*>(data)[row] = static_cast<float>(value);
      break;
    case type_id::float64:
      static_cast<double*>(data)[row] = static_cast<double>(value);
      break;
    case type_id::uint64:
      static_cast<std::uint64_t*>(data)[row] = static_cast<std::uint64_t>(value);
      break;
    default:
      static_cast<std::int64_t*>(data)[row] = static_cast<std::int64_t>(value);
      break;
  }
}

template <class Acc>
struct cumsum_kernel {
  column_device_view in;
  std::size_t chunk;  // rows per chunk, a multiple of 32
  std::size_t chunks;
  Acc* totals;  // one per chunk
  void* out;
  type_id out_type;
  bitmask_word* out_mask;  // null when the input has no mask
  int phase;

  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const c = t.global();
    if (phase == 1) {
      if (c != 0) return;
      Acc running{};
      for (std::size_t k = 0; k < chunks; ++k) {
        Acc const here = totals[k];
        totals[k] = running;
        running = frame::add(running, here);
      }
      return;
    }
    if (c >= chunks) return;
    std::size_t const begin = c * chunk;
    std::size_t const end = begin + chunk < in.size() ? begin + chunk : in.size();
    Acc running = phase == 0 ? Acc{} : totals[c];
    bitmask_word word = 0;
    for (std::size_t row = begin; row < end; ++row) {
      bool const valid = in.is_valid(row);
      Acc v{};
      bool const number = valid && load<Acc>(in, row, v);
      if (number) running = frame::add(running, v);
      if (phase == 2) {
        // A NaN row is NaN: v holds it (load returned false only because it is NaN).
        store<Acc>(out, out_type, row, number || !valid ? running : v);
        if (valid) word |= bitmask_word{1} << (row % bitmask_word_bits);
        bool const last_of_word = row % bitmask_word_bits == bitmask_word_bits - 1;
        if (out_mask != nullptr && (last_of_word || row + 1 == end)) {
          out_mask[row / bitmask_word_bits] = word;
          word = 0;
        }
      }
    }
    if (phase == 0) totals[c] = running;
  }
};

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
      bitmask_word const bit = bitmask_word{1} << (row % bitmask_word_bits);
      word = src.is_valid(s) ? (word | bit) : (word & ~bit);
    }
    if (dst_mask != nullptr) dst_mask[w] = word;
  }
};

constexpr unsigned block_size = 256;
constexpr std::size_t max_threads = 16384;
constexpr std::size_t items_per_thread = 32;

// Threads for `items` items: about one per 32, at most max_threads, a whole number of blocks
// (one thread, one block for the smallest).
launch_config shape(std::size_t items) {
  std::size_t threads = std::min(max_threads, (items + items_per_thread - 1) / items_per_thread);
  threads = std::max<std::size_t>(threads, 1);
  unsigned const block = static_cast<unsigned>(std::min<std::size_t>(block_size, threads));
  unsigned const grid = static_cast<unsigned>((threads + block - 1) / block);
  return {grid, block, stream_handle{}};
}

std::size_t threads_of(launch_config const& c) {
  return static_cast<std::size_t>(c.grid) * c.block;
}

void synchronize() {
  backend().synchronize_stream(stream_handle{});
}

void check_numeric(column const& c, char const* what) {
  GPUMEM_EXPECTS(is_numeric(c.type()), std::string(what) + ": a " + to_string(c.type()) +
                                           " column has no numeric values");
}

template <class Acc>
partial<Acc> fold(column const& c) {
  partial<Acc> result{0, Acc{}, Acc{}, Acc{}};
  if (c.empty()) return result;
  spill_lock lock;  // the column's buffers: on the device for the passes, not exposed
  column_device_view const view = column_device_view::create(c);
  std::size_t items = c.size();
  buffer input;  // the previous pass's partials
  for (bool first = true;; first = false) {
    launch_config const config = shape(items);
    std::size_t const threads = threads_of(config);
    buffer out(threads * sizeof(partial<Acc>));
    reduce_kernel<Acc> const k{
        view, first ? nullptr : static_cast<partial<Acc> const*>(input.get_ptr(access::read)),
        items, static_cast<partial<Acc>*>(out.get_ptr(access::write))};
    gpumem::launch(config, k);
    synchronize();
    input = std::move(out);
    items = threads;
    if (threads == 1) break;
  }
  input.copy_to_host(&result, sizeof(result));
  return result;
}

type_id sum_type(type_id t) {
  switch (kind_of(t)) {
    case acc_kind::signed_int:
      return type_id::int64;
    case acc_kind::unsigned_int:
      return t == type_id::bool8 ? type_id::int64 : type_id::uint64;
    default:
      return t;
  }
}

// The scalar of type `t` holding `v` (an accumulator value).
template <class Acc>
scalar make_scalar(type_id t, Acc v) {
  switch (t) {
    case type_id::int8:
      return scalar::of(static_cast<std::int8_t>(v));
    case type_id::int16:
      return scalar::of(static_cast<std::int16_t>(v));
    case type_id::int32:
      return scalar::of(static_cast<std::int32_t>(v));
    case type_id::int64:
      return scalar::of(static_cast<std::int64_t>(v));
    case type_id::uint8:
      return scalar::of(static_cast<std::uint8_t>(v));
    case type_id::uint16:
      return scalar::of(static_cast<std::uint16_t>(v));
    case type_id::uint32:
      return scalar::of(static_cast<std::uint32_t>(v));
    case type_id::uint64:
      return scalar::of(static_cast<std::uint64_t>(v));
    case type_id::float32:
      return scalar::of(static_cast<float>(v));
    case type_id::float64:
      return scalar::of(static_cast<double>(v));
    case type_id::bool8:
      return scalar::of(v != Acc{});
    default:
      return scalar::null(t);
  }
}

template <class Acc>
scalar reduce_as(column const& c, reduction op) {
  partial<Acc> const p = fold<Acc>(c);
  type_id const t = c.type().id();
  switch (op) {
    case reduction::sum:
      return make_scalar<Acc>(sum_type(t), p.count == 0 ? Acc{} : p.sum);
    case reduction::min:
      return p.count == 0 ? scalar::null(t) : make_scalar<Acc>(t, p.min);
    case reduction::max:
      return p.count == 0 ? scalar::null(t) : make_scalar<Acc>(t, p.max);
    case reduction::mean:
      if (p.count == 0) return scalar::null(type_id::float64);
      return scalar::of(static_cast<double>(p.sum) / static_cast<double>(p.count));
  }
  return scalar::null(t);
}

template <class Acc>
column cumsum_as(column const& c) {
  type_id const out_type = sum_type(c.type().id());
  std::size_t const rows = c.size();
  buffer data(rows * fixed_width_bytes(out_type), c.data().memory());
  buffer mask;
  if (c.nullable()) mask = buffer(bitmask_allocation_bytes(rows), c.data().memory());
  if (rows != 0) {
    spill_lock lock;  // input and output buffers: held for the passes, not exposed
    std::size_t const chunks_wanted = std::min(max_threads, bitmask_words(rows));
    std::size_t chunk = (rows + chunks_wanted - 1) / chunks_wanted;
    chunk = (chunk + bitmask_word_bits - 1) / bitmask_word_bits * bitmask_word_bits;
    std::size_t const chunks = (rows + chunk - 1) / chunk;
    buffer totals(chunks * sizeof(Acc));
    cumsum_kernel<Acc> k{
        column_device_view::create(c),
        chunk,
        chunks,
        static_cast<Acc*>(totals.get_ptr(access::write)),
        data.get_ptr(access::write),
        out_type,
        c.nullable() ? static_cast<bitmask_word*>(mask.get_ptr(access::write)) : nullptr,
        0};
    unsigned const block = static_cast<unsigned>(std::min<std::size_t>(block_size, chunks));
    launch_config const per_chunk{static_cast<unsigned>((chunks + block - 1) / block), block,
                                  stream_handle{}};
    gpumem::launch(per_chunk, k);
    k.phase = 1;
    gpumem::launch(launch_config{1, 1, stream_handle{}}, k);
    k.phase = 2;
    gpumem::launch(per_chunk, k);
    synchronize();
  }
  std::optional<std::size_t> nulls;
  if (!c.nullable()) nulls = 0;
  return column(out_type, rows, std::move(data), std::move(mask), nulls);
}

// Copies rows [0, values.size()) of `values` to rows [begin, ...) of `dst` / `dst_mask`.
void copy_rows(column const& values, void* dst, bitmask_word* dst_mask, std::size_t begin) {
  if (values.empty()) return;
  std::size_t const first_word = begin / bitmask_word_bits;
  std::size_t const last_word = (begin + values.size() - 1) / bitmask_word_bits;
  std::size_t const words = last_word - first_word + 1;
  unsigned const block = static_cast<unsigned>(std::min<std::size_t>(block_size, words));
  copy_rows_kernel const k{column_device_view::create(values),
                           dst,
                           dst_mask,
                           begin,
                           values.size(),
                           size_of(values.type()),
                           first_word};
  gpumem::launch({static_cast<unsigned>((words + block - 1) / block), block, stream_handle{}}, k);
  synchronize();
}

}  // namespace

char const* to_string(reduction op) noexcept {
  switch (op) {
    case reduction::sum:
      return "sum";
    case reduction::min:
      return "min";
    case reduction::max:
      return "max";
    case reduction::mean:
      return "mean";
  }
  return "?";
}

bool is_numeric(data_type type) noexcept {
  return type.id() != type_id::string;
}

scalar reduce(column const& c, reduction op) {
  check_numeric(c, to_string(op));
  switch (kind_of(c.type().id())) {
    case acc_kind::signed_int:
      return reduce_as<std::int64_t>(c, op);
    case acc_kind::unsigned_int:
      return reduce_as<std::uint64_t>(c, op);
    default:
      return reduce_as<double>(c, op);
  }
}

column cumsum(column const& c) {
  check_numeric(c, "cumsum");
  switch (kind_of(c.type().id())) {
    case acc_kind::signed_int:
      return cumsum_as<std::int64_t>(c);
    case acc_kind::unsigned_int:
      return cumsum_as<std::uint64_t>(c);
    default:
      return cumsum_as<double>(c);
  }
}

void write_rows(column& target, std::size_t begin, column const& values) {
  GPUMEM_EXPECTS(target.type().id() != type_id::string,
                 "write_rows: strings columns cannot be written in place");
  detail::check_element_type(target.type(), values.type().id(), "write_rows");
  GPUMEM_EXPECTS(begin <= target.size() && values.size() <= target.size() - begin,
                 "write_rows: rows [" + std::to_string(begin) + ", " + std::to_string(begin) +
                     " + " + std::to_string(values.size()) + ") are outside the column of " +
                     std::to_string(target.size()) + " rows");
  if (values.empty()) return;
  // Copy on write is the buffer's (docs/buffers.md): the target's handles are moved out, so they
  // are the only ones of this column, and get_ptr(access::write) gives them bytes of their own
  // when any other handle (a shallow copy, a view, another frame) shares them. Buffers that are
  // not copy-on-write are first copied into copy-on-write ones: only the buffer layer can tell
  // whether their bytes are shared.
  column::contents parts = target.release();
  try {
    if (!parts.data.is_copy_on_write()) parts.data = parts.data.as_copy_on_write();
    if (!parts.null_mask.empty() && !parts.null_mask.is_copy_on_write())
      parts.null_mask = parts.null_mask.as_copy_on_write();
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
