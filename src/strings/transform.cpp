// The host side of strings::transform: input checks, the memory system, the result slots, and the
// gather (the scan of the chunk sums runs here, between the device passes of detail/gather.hpp).
//
// Why a host scan: the totals must come to the host anyway (the character buffer's size, the
// failure count decide what happens next), and a chunk sum per 64 rows keeps the copy small
// (1.25 MB each way for 10 million rows). The device passes use no block barriers, so the same
// code runs on the host backend.
//
// Failure path: every result is released (the gather kernel with no characters), the memory
// system's records of the failed allocations are cleared (memsys::check()), then the exception.
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/strings/transform.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace gpumem::strings {

namespace {

std::size_t saturating_add(std::size_t a, std::size_t b) {
  return a > ~std::size_t{0} - b ? ~std::size_t{0} : a + b;
}

std::atomic<std::size_t>& int32_limit() {
  static std::atomic<std::size_t> limit{max_int32_offset_bytes};
  return limit;
}

template <class T>
T read_value(void const* device_ptr) {
  T value{};
  backend().copy(&value, device_ptr, sizeof(T));
  return value;
}

// Offset `row` of a strings column (0 to size()): the entry of its offsets child at the column's
// offset and the child's own (a child may be a slice of a larger offsets column). One value read
// inside a spill lock: the offsets stay spillable.
std::int64_t offset_at(column const& strings, std::size_t row) {
  column const& offsets = strings.child(0);
  spill_lock lock;
  auto const* base = static_cast<char const*>(offsets.data().get_ptr(access::read));
  std::size_t const entry = offsets.offset() + strings.offset() + row;
  return offsets.type() == type_id::int64
             ? read_value<std::int64_t>(base + entry * 8)
             : std::int64_t{read_value<std::int32_t>(base + entry * 4)};
}

// The characters the rows of a strings column span (clamped to its buffer: a malformed column is
// reported by the kernel, row by row).
std::size_t spanned_bytes(column const& c) {
  if (c.size() == 0 || c.children().empty() || c.child(0).size() < c.offset() + c.size() + 1)
    return 0;
  auto const chars = static_cast<std::int64_t>(c.data().size());
  std::int64_t const first = std::clamp<std::int64_t>(offset_at(c, 0), 0, chars);
  std::int64_t const last = std::clamp<std::int64_t>(offset_at(c, c.size()), 0, chars);
  return last > first ? static_cast<std::size_t>(last - first) : 0;
}

}  // namespace

std::size_t heap_bytes_for(std::size_t rows, std::size_t char_bytes,
                           transform_options const& options) {
  if (options.heap_bytes != 0) return options.heap_bytes;
  environment const env = environment_snapshot();
  double const factor = options.heap_factor.value_or(env.string_heap_factor);
  GPUMEM_EXPECTS(std::isfinite(factor) && factor >= 0,
                 "strings::transform: heap_factor must be a finite number >= 0, not " +
                     std::to_string(factor));
  std::size_t const per_row = options.heap_bytes_per_row.value_or(env.string_heap_bytes_per_row);
  double const scaled = std::ceil(factor * static_cast<double>(char_bytes));
  std::size_t const from_chars =
      scaled >= 1.8e19 ? ~std::size_t{0} : static_cast<std::size_t>(scaled);
  std::size_t const from_rows =
      per_row != 0 && rows > ~std::size_t{0} / per_row ? ~std::size_t{0} : rows * per_row;
  // The slab heap keeps up to an eighth for its per-shard current slabs: add that.
  std::size_t const body = saturating_add(from_chars, from_rows);
  return std::max(min_heap_bytes, saturating_add(body, body / 7));
}

std::size_t heap_bytes_for(column const& input, transform_options const& options) {
  return heap_bytes_for(input.size(), spanned_bytes(input), options);
}

namespace detail {

std::size_t set_int32_offset_limit(std::size_t bytes) noexcept {
  return int32_limit().exchange(bytes);
}

// On the cuda backend the current NRT memory system of launched code is one __device__ pointer per
// translation unit (nrt/launch.hpp): two calls running at once with different memory systems (each
// call makes its own unless given one) would let one call's threads allocate from the other's heap.
// Calls are serialised. (The host backend's pointer is per thread; it takes the same lock, so that
// the one code path is the one its tests run.)
std::mutex& transform_mutex() {
  static std::mutex m;
  return m;
}

class transform_state {
 public:
  std::unique_lock<std::mutex> serial;  // first: released after everything below is destroyed
  // Every buffer pointer of the call (inputs, slots, results) is taken inside this lock: held on
  // the device for the call, never exposed. ~transform_run synchronises before it goes.
  spill_lock pointers;
  std::vector<column const*> inputs;
  transform_options options;
  gather_launchers launchers{};
  std::size_t rows = 0;
  std::unique_ptr<nrt::memsys> own_memsys;
  nrt::memsys* ms = nullptr;
  buffer slots;     // meminfo, data, bytes: rows entries each
  buffer counters;  // transform_counters
  bool results_live = false;

  row_results results() {
    auto* base = static_cast<char*>(slots.get_ptr(access::write));
    return {reinterpret_cast<NRT_MemInfo**>(base),
            reinterpret_cast<char const**>(base + rows * sizeof(void*)),
            reinterpret_cast<std::int64_t*>(base + 2 * rows * sizeof(void*)), rows};
  }
  transform_counters* device_counters() {
    return static_cast<transform_counters*>(counters.get_ptr(access::write));
  }
  launch_config config(std::size_t threads) const {
    unsigned const block = options.block_size;
    std::size_t const grid = (threads + block - 1) / block;
    GPUMEM_EXPECTS(grid <= 0x7FFFFFFFu, "strings::transform: too many rows for one grid");
    return {static_cast<unsigned>(grid), block, options.stream};
  }
  void synchronize() { backend().synchronize_stream(options.stream); }
  transform_counters read_counters() {
    transform_counters c{};
    backend().copy_async(&c, device_counters(), sizeof(c), options.stream);
    synchronize();
    return c;
  }

  // Drops every result's reference; returns the out_of_memory the heap recorded, if any (cleared).
  std::exception_ptr release_all() {
    if (results_live) {
      results_live = false;
      launchers.gather32(*ms, config(rows),
                         gather_kernel<std::int32_t>{results(), nullptr, nullptr});
      synchronize();
    }
    return clear_heap_failures();
  }
  // memsys::check() until clean, keeping the out_of_memory (failed allocations the UDF made) and
  // letting logic errors (refcount mistakes, invalid frees) through.
  std::exception_ptr clear_heap_failures() {
    std::exception_ptr oom;
    for (int i = 0; i < 3; ++i) {
      try {
        ms->check();
        break;
      } catch (out_of_memory const&) {
        oom = std::current_exception();
      }
    }
    return oom;
  }

  void fill_report(transform_counters const& c, std::size_t output_bytes, bool wide) {
    transform_report* r = options.report;
    if (r == nullptr) return;
    *r = transform_report{};
    r->rows = rows;
    r->null_rows = c.null_rows;
    r->managed_rows = c.managed_rows;
    r->output_bytes = output_bytes;
    r->int64_offsets = wide;
    r->own_memsys = own_memsys != nullptr;
    nrt::heap_usage const u = ms->heap().usage();
    r->heap_bytes = u.capacity_bytes;
    r->heap_peak_bytes = u.peak_bytes;
    r->has_statistics = ms->statistics_enabled();
    if (r->has_statistics) r->statistics = ms->statistics();
  }

  [[noreturn]] void throw_malformed(transform_counters const& c) {
    unsigned long long const key = c.first_malformed - 1;
    auto const input = static_cast<std::size_t>(key >> 48);
    std::size_t const row = static_cast<std::size_t>(key & ((1ull << 48) - 1));
    column const& in = *inputs[input];
    std::int64_t const begin = offset_at(in, row);
    std::int64_t const end = offset_at(in, row + 1);
    std::ostringstream out;
    out << "strings::transform: input column " << input << " is malformed at row " << row
        << ": its offsets give characters [" << begin << ", " << end
        << "), not a range within the column's " << in.data().size() << " bytes of characters ("
        << c.malformed_rows << " such row(s))";
    throw logic_error(out.str());
  }

  [[noreturn]] void throw_failed(transform_counters const& c, std::exception_ptr oom) {
    auto const first = static_cast<errc>(c.first_error);
    // Out of memory wins over other errors whenever the heap recorded a failure, whichever row's
    // error came first.
    if (first == errc::out_of_memory || oom) {
      std::size_t requested = 0, used = 0, peak = 0;
      std::string allocator = ms->heap().name();
      if (oom) {
        try {
          std::rethrow_exception(oom);
        } catch (out_of_memory const& e) {
          requested = e.requested_bytes();
          used = e.current_bytes();
          peak = e.peak_bytes();
        }
      }
      std::ostringstream detail;
      detail << "strings::transform: ";
      if (c.failed_rows != 0)
        detail << c.failed_rows << " of " << rows << " rows could not allocate their result";
      else
        detail << "an allocation inside the UDF failed and the UDF went on (its result of " << rows
               << " rows cannot be trusted)";
      detail << " in a heap of " << ms->heap().capacity() << " bytes ("
             << format_bytes(ms->heap().capacity()) << "); every result was "
             << "released. Give a larger heap: transform_options::heap_bytes or memsys, or "
             << "GPUMEM_STRING_HEAP_FACTOR / GPUMEM_STRING_HEAP_BYTES_PER_ROW";
      throw out_of_memory(requested, allocator, used, peak, detail.str());
    }
    std::ostringstream out;
    out << "strings::transform: " << c.failed_rows << " of " << rows
        << " rows failed; the first error: " << errc_name(first);
    throw logic_error(out.str());
  }

  template <class Offset>
  column gather(transform_counters const& c, std::vector<std::int64_t> const& first,
                std::size_t total, buffer& chunk_bytes, buffer mask, type_id offset_type) {
    std::size_t const chunks = first.size();
    backend().copy_async(chunk_bytes.get_ptr(access::write), first.data(),
                         chunks * sizeof(std::int64_t), options.stream);
    buffer offsets((rows + 1) * sizeof(Offset));
    buffer chars(total);
    auto* const off = static_cast<Offset*>(offsets.get_ptr(access::write));
    offsets_kernel<Offset> const ok{
        results(), static_cast<std::int64_t const*>(chunk_bytes.get_ptr(access::read)), off};
    gather_kernel<Offset> const gk{
        results(), off, total != 0 ? static_cast<char*>(chars.get_ptr(access::write)) : nullptr};
    if constexpr (sizeof(Offset) == 8) {
      launchers.offsets64(config(chunks), ok);
      results_live = false;  // the gather drops the references, even with nothing to copy
      launchers.gather64(*ms, config(rows), gk);
    } else {
      launchers.offsets32(config(chunks), ok);
      results_live = false;
      launchers.gather32(*ms, config(rows), gk);
    }
    synchronize();
    // A UDF that released a reference it did not own freed its result before the gather: the
    // release pass met a count of zero, and the characters copied may be another allocation's.
    try {
      ms->check();
    } catch (logic_error const& e) {
      throw logic_error(std::string("strings::transform: a UDF result was freed before it was "
                                    "gathered (the UDF released a reference it did not own); no "
                                    "column is returned: ") +
                        e.what());
    }
    fill_report(c, total, sizeof(Offset) == 8);
    if (c.null_rows == 0) mask = buffer();
    return gpumem::detail::unchecked_strings_column(rows, std::move(offsets), offset_type,
                                                    std::move(chars), std::move(mask),
                                                    static_cast<std::size_t>(c.null_rows));
  }

  column finish() {
    if (rows == 0) {
      fill_report(transform_counters{}, 0, false);
      return strings_column_from_host(std::vector<std::string>{});
    }
    std::size_t const chunks = chunk_count(rows);
    buffer chunk_bytes(chunks * sizeof(std::int64_t));
    buffer mask(bitmask_allocation_bytes(rows));
    launchers.totals(
        config(chunks),
        totals_kernel{results(), static_cast<std::int64_t*>(chunk_bytes.get_ptr(access::write)),
                      static_cast<bitmask_word*>(mask.get_ptr(access::write)), device_counters()});
    std::vector<std::int64_t> sums(chunks);
    backend().copy_async(sums.data(), chunk_bytes.get_ptr(access::read),
                         chunks * sizeof(std::int64_t), options.stream);
    transform_counters const c = read_counters();
    if (c.malformed_rows != 0) {
      release_all();
      throw_malformed(c);
    }
    if (c.failed_rows != 0) throw_failed(c, release_all());
    // A failed allocation the UDF went on from (a failed udf_string passed on reads as an empty
    // string) leaves no failed row, but its row may be wrong: the heap's record fails the call.
    if (std::exception_ptr oom = clear_heap_failures()) {
      release_all();
      throw_failed(c, oom);
    }
    std::size_t total = 0;
    for (std::size_t i = 0; i < chunks; ++i) {
      std::int64_t const s = sums[i];
      sums[i] = static_cast<std::int64_t>(total);
      total += static_cast<std::size_t>(s);
    }
    if (total > int32_limit().load())
      return gather<std::int64_t>(c, sums, total, chunk_bytes, std::move(mask), type_id::int64);
    return gather<std::int32_t>(c, sums, total, chunk_bytes, std::move(mask), type_id::int32);
  }
};

transform_run::transform_run(column const* const* inputs, std::size_t count,
                             transform_options const& options, gather_launchers const& launchers)
    : state_(new transform_state) {
  std::unique_ptr<transform_state> s(state_);
  s->serial = std::unique_lock<std::mutex>(transform_mutex());
  s->options = options;
  s->launchers = launchers;
  GPUMEM_EXPECTS(options.block_size > 0 && options.block_size <= max_transform_block_size,
                 "strings::transform: block_size must be in [1, " +
                     std::to_string(max_transform_block_size) + "], got " +
                     std::to_string(options.block_size));
  std::size_t chars = 0;
  for (std::size_t k = 0; k < count; ++k) {
    column const& in = *inputs[k];
    if (in.type().id() != type_id::string)
      throw logic_error("strings::transform: input column " + std::to_string(k) +
                        " is not a strings column");
    if (k > 0 && in.size() != inputs[0]->size())
      throw logic_error("strings::transform: input column " + std::to_string(k) + " has " +
                        std::to_string(in.size()) + " rows, input column 0 has " +
                        std::to_string(inputs[0]->size()));
    if (in.size() != 0 &&
        (in.children().empty() || in.child(0).size() < in.offset() + in.size() + 1))
      throw logic_error("strings::transform: input column " + std::to_string(k) +
                        " has too few offsets for its rows (malformed)");
    s->inputs.push_back(&in);
    chars = saturating_add(chars, spanned_bytes(in));
  }
  s->rows = count == 0 ? 0 : inputs[0]->size();
  if (options.memsys != nullptr) {
    s->ms = options.memsys;
    // Errors the caller's memory system recorded before this call are the caller's: reported
    // here (memsys::check() throws and clears them), never taken for, or hidden by, this call's.
    s->ms->check();
  } else {
    nrt::heap_options heap;
    heap.bytes = heap_bytes_for(s->rows, chars, options);
    s->own_memsys = std::make_unique<nrt::memsys>(heap, nrt::memsys_options{options.statistics});
    s->ms = s->own_memsys.get();
  }
  if (s->rows != 0) {
    s->slots = buffer(s->rows * (2 * sizeof(void*) + sizeof(std::int64_t)));
    s->counters = buffer(sizeof(transform_counters));
    backend().fill_async(s->counters.get_ptr(access::write), 0, sizeof(transform_counters),
                         options.stream);
  }
  s.release();
}

transform_run::~transform_run() {
  try {
    if (state_->results_live) state_->release_all();
    state_->synchronize();
  } catch (std::exception const& e) {
    log(log_level::error,
        std::string("strings::transform: releasing the results failed: ") + e.what());
  }
  delete state_;
}

std::size_t transform_run::rows() const noexcept {
  return state_->rows;
}
nrt::memsys& transform_run::memsys() noexcept {
  return *state_->ms;
}
row_results transform_run::results() const noexcept {
  return state_->results();
}
transform_counters* transform_run::counters() const noexcept {
  return state_->device_counters();
}
input_rows transform_run::input(std::size_t k) const {
  column const& c = *state_->inputs.at(k);
  return {strings_column_device_view::create(c), static_cast<std::int64_t>(c.data().size())};
}
launch_config transform_run::config(std::size_t threads) const {
  return state_->config(threads);
}
void transform_run::udf_launched() noexcept {
  state_->results_live = true;
}
column transform_run::finish() {
  return state_->finish();
}

}  // namespace detail
}  // namespace gpumem::strings
