// gpumem/strings/transform.hpp
//
// strings::transform: runs a device functor (a string UDF) on every row of one or more strings
// columns and gathers what it returns into a new strings column, with the NRT memory system's
// books balanced afterwards.
//
//   struct spec_udf {  // Python: (s.upper() if len(s) > 2 else s + s) + "abc"
//     GPUMEM_HD gpumem::strings::udf_result operator()(gpumem::strings::string_view s) const {
//       gpumem::strings::udf_string r = s.length() > 2 ? upper(s) : s + s;
//       r += "abc";
//       return r;  // a managed string; or return a string_view (no copy), or udf_result::null()
//     }
//   };
//   gpumem::column out = gpumem::strings::transform(in, spec_udf{});
//   auto two = gpumem::strings::transform(a, b, [] GPUMEM_HD(string_view x, string_view y) {...});
//
// Rows. Null in, null out: a row where any input is null gives a null without calling the UDF,
// unless the UDF takes nullable_string arguments (strings/udf_result.hpp), which sees every row.
// The UDF may return null itself. What it may return (views, managed strings) is said there. The
// input columns may be slices; they must have the same number of rows.
//
// Lifecycle: (1) a kernel runs the UDF per row and keeps each result (a meminfo reference, or a
// view); (2) sizes are summed per chunk and scanned, offsets written (int32, or int64 when the
// output passes 2^31 - 1 bytes); (3) one pass copies each row into the new column and drops its
// reference (NRT_decref: the udf_string's destructor frees its data, then the block). After that
// every allocation the results made is freed: alloc == free and mi_alloc == mi_free.
// docs/strings.md has the table.
//
// Memory. The UDF allocates from an NRT memory system: options.memsys when given (used as it is),
// otherwise one made for this call and destroyed before it returns, with a heap of
// heap_factor x the character bytes of all inputs + heap_bytes_per_row x rows, plus an eighth
// (the slab heap's per-shard slabs), at least min_heap_bytes (GPUMEM_STRING_HEAP_FACTOR,
// GPUMEM_STRING_HEAP_BYTES_PER_ROW; docs/environment.md), or options.heap_bytes.
// heap_bytes_for(column, options) gives that size for one input column.
//
// Errors (host exceptions, thrown after every result has been released, never a partial column):
//   * a row whose result could not be allocated, or any allocation inside the UDF that failed
//     (also one the UDF went on from: a failed udf_string passed to another function reads as
//     an empty string, so its row cannot be trusted): gpumem::out_of_memory, naming how many rows
//     failed and the heap's size; the memory system is usable again at once. Out of memory wins
//     over other errors of the same call;
//   * a UDF result failed with another error (value_error, ...): gpumem::logic_error naming it;
//   * with options.memsys: errors that memory system recorded before the call (memsys::check())
//     are thrown first, before anything runs;
//   * inputs that are not strings columns, differ in rows, or whose offsets are not valid ranges
//     of their characters: gpumem::logic_error naming the input and the row.
//   * a UDF result freed before the gather (the UDF released a reference it did not own):
//     gpumem::logic_error from that call, after the gather found the count at zero.
// Device code never traps. A UDF's other refcount mistakes are reported by memsys::check() as
// logic_error, from the call whose UDF made them.
//
// Threads and streams: the work runs on options.stream; transform returns when the column is
// complete. Any number of threads may call transform at once; the calls run one after another (a
// process-wide lock: on the cuda backend the memory system launched code uses is one pointer per
// translation unit, nrt/launch.hpp, so two calls at once would mix heaps). Your own NRT
// kernels of the same .cu file must not run while a transform of that file runs with another
// memory system.
#pragma once

#include <gpumem/column/column.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/memsys.hpp>
#include <gpumem/strings/detail/gather.hpp>
#include <gpumem/strings/detail/transform_kernels.hpp>
#include <gpumem/strings/udf_result.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <optional>

namespace gpumem::strings {

inline constexpr std::size_t min_heap_bytes = 16 * MiB;

// What a call did, filled in when transform_options::report points here.
struct transform_report {
  std::size_t rows = 0;
  std::size_t null_rows = 0;
  std::size_t managed_rows = 0;  // rows whose result was a managed (allocated) string
  std::size_t output_bytes = 0;
  bool int64_offsets = false;
  bool own_memsys = false;     // transform made (and destroyed) the memory system
  std::size_t heap_bytes = 0;  // its heap's capacity
  std::size_t heap_peak_bytes = 0;
  bool has_statistics = false;        // the memory system counts: then `statistics` is set
  nrt::memsys_statistics statistics;  // after the release pass (since the last reset)
};

// The UDF kernel is compiled to keep at least this many threads busy on each SM (its registers
// capped at 65536 / 768 per thread: a UDF's inlined string functions would otherwise take so
// many registers that three quarters of an SM sat idle), and so takes blocks of at most this many.
inline constexpr unsigned max_transform_block_size = 768;

struct transform_options {
  nrt::memsys* memsys = nullptr;      // used as is; null: transform makes one for the call
  std::size_t heap_bytes = 0;         // heap of that memory system; 0: heap_bytes_for()
  std::optional<double> heap_factor;  // default GPUMEM_STRING_HEAP_FACTOR
  std::optional<std::size_t> heap_bytes_per_row;  // default GPUMEM_STRING_HEAP_BYTES_PER_ROW
  bool statistics = false;  // count NRT statistics in the memory system transform makes
  stream_handle stream = nullptr;
  unsigned block_size = 256;  // threads per block, 1 to max_transform_block_size
  transform_report* report = nullptr;
};

// The heap transform would make for `input` (or for `rows` rows of `char_bytes` bytes).
std::size_t heap_bytes_for(column const& input, transform_options const& options = {});
std::size_t heap_bytes_for(std::size_t rows, std::size_t char_bytes,
                           transform_options const& options = {});

namespace detail {

// The kernels after the UDF's, launched from the caller's translation unit (device code lives
// there: nrt::launch's memory system and the destructors the results point to).
struct gather_launchers {
  void (*totals)(launch_config const&, totals_kernel const&);
  void (*offsets32)(launch_config const&, offsets_kernel<std::int32_t> const&);
  void (*offsets64)(launch_config const&, offsets_kernel<std::int64_t> const&);
  void (*gather32)(nrt::memsys&, launch_config const&, gather_kernel<std::int32_t> const&);
  void (*gather64)(nrt::memsys&, launch_config const&, gather_kernel<std::int64_t> const&);
};

class transform_state;

// The host side of one call (src/strings/transform.cpp): checks the inputs, provides the memory
// system and the result slots, then finish() gathers. Its destructor releases results that
// finish() did not (an exception in between).
class transform_run {
 public:
  transform_run(column const* const* inputs, std::size_t count, transform_options const& options,
                gather_launchers const& launchers);
  transform_run(transform_run const&) = delete;
  transform_run& operator=(transform_run const&) = delete;
  ~transform_run();

  std::size_t rows() const noexcept;
  nrt::memsys& memsys() noexcept;
  row_results results() const noexcept;
  transform_counters* counters() const noexcept;
  input_rows input(std::size_t k) const;
  launch_config config(std::size_t threads) const;
  // Call after the UDF kernel was launched: from then on the slots hold results to release.
  void udf_launched() noexcept;
  column finish();

 private:
  transform_state* state_;
};

// Tests: the output byte count above which offsets are int64 (default max_int32_offset_bytes).
// Returns the previous value.
std::size_t set_int32_offset_limit(std::size_t bytes) noexcept;

}  // namespace detail

namespace {  // like nrt::launch: the kernels belong to the translation unit that calls transform

template <class K>
void launch_plain_kernel(launch_config const& c, K const& k) {
  gpumem::launch(c, k);
}
template <class K>
void launch_nrt_kernel(nrt::memsys& ms, launch_config const& c, K const& k) {
  nrt::launch(ms, c, k);
}

template <class F, std::size_t N>
column transform_inputs(std::array<column const*, N> const& inputs, F const& udf,
                        transform_options const& options) {
  static constexpr detail::gather_launchers launchers{
      &launch_plain_kernel<detail::totals_kernel>,
      &launch_plain_kernel<detail::offsets_kernel<std::int32_t>>,
      &launch_plain_kernel<detail::offsets_kernel<std::int64_t>>,
      &launch_nrt_kernel<detail::gather_kernel<std::int32_t>>,
      &launch_nrt_kernel<detail::gather_kernel<std::int64_t>>};
  detail::transform_run run(inputs.data(), N, options, launchers);
  if (run.rows() != 0) {
    detail::udf_kernel<F, N> kernel{udf, {}, run.results(), run.counters()};
    for (std::size_t k = 0; k < N; ++k)
      kernel.inputs[k] = run.input(k);
    nrt::launch_bounded<max_transform_block_size, 1>(run.memsys(), run.config(run.rows()), kernel);
    run.udf_launched();
  }
  return run.finish();
}

template <class F>
column transform(column const& input, F udf, transform_options const& options = {}) {
  return transform_inputs<F, 1>({&input}, udf, options);
}

template <class F>
column transform(column const& a, column const& b, F udf, transform_options const& options = {}) {
  return transform_inputs<F, 2>({&a, &b}, udf, options);
}

template <class F, std::size_t N>
column transform(std::array<std::reference_wrapper<column const>, N> const& inputs, F udf,
                 transform_options const& options = {}) {
  static_assert(N >= 1, "strings::transform needs at least one input column");
  std::array<column const*, N> pointers{};
  for (std::size_t k = 0; k < N; ++k)
    pointers[k] = &inputs[k].get();
  return transform_inputs<F, N>(pointers, udf, options);
}

}  // namespace
}  // namespace gpumem::strings
