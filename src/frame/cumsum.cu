// frame::cumsum (column_ops.hpp): the running sum as device code, a functor launched with
// gpumem::launch, so the same code runs as CUDA kernels and on the host backend's thread pool.
// Values are read through an accumulator type (numeric_values.hpp).
//
// cumsum_kernel: rows are cut into chunks of a multiple of 32 rows (so each thread owns whole mask
// words); phase 0 sums each chunk, phase 1 (one thread) turns the chunk sums into exclusive
// prefixes, phase 2 writes each chunk's running sums from its prefix.
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/bitmask.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/frame/column_ops.hpp>

#include "launch_shape.hpp"
#include "numeric_values.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

namespace gpumem::frame {
namespace {

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
        running = detail::add(running, here);
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
      bool const number = valid && detail::load<Acc>(in, row, v);
      if (number) running = detail::add(running, v);
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

template <class Acc>
column cumsum_as(column const& c) {
  type_id const out_type = detail::sum_type(c.type().id());
  std::size_t const rows = c.size();
  buffer data(rows * fixed_width_bytes(out_type), c.data().memory());
  buffer mask;
  if (c.nullable()) mask = buffer(bitmask_allocation_bytes(rows), c.data().memory());
  if (rows != 0) {
    spill_lock lock;  // input and output buffers: held for the passes, not exposed
    std::size_t const chunks_wanted = std::min(detail::max_threads, bitmask_words(rows));
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
    launch_config const per_chunk = detail::covering(chunks);
    gpumem::launch(per_chunk, k);
    k.phase = 1;
    gpumem::launch(launch_config{1, 1, stream_handle{}}, k);
    k.phase = 2;
    gpumem::launch(per_chunk, k);
    detail::synchronize();
  }
  std::optional<std::size_t> nulls;
  if (!c.nullable()) nulls = 0;
  return column(out_type, rows, std::move(data), std::move(mask), nulls);
}

}  // namespace

column cumsum(column const& c) {
  detail::check_numeric(c, "cumsum");
  return detail::with_accumulator(c.type().id(),
                                  [&](auto zero) { return cumsum_as<decltype(zero)>(c); });
}

}  // namespace gpumem::frame
