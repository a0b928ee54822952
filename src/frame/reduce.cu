// frame::reduce (column_ops.hpp): sum, min, max and mean as device code, a functor launched with
// gpumem::launch, so the same code runs as a CUDA kernel and on the host backend's thread pool.
// Values are read through an accumulator type (numeric_values.hpp).
//
// reduce_kernel: thread t folds rows t, t + T, t + 2T, ... (T threads, coalesced on a GPU) into a
// partial {count, sum, min, max}; later launches fold the partials the same way until one is
// left, which is copied back. The launch shapes depend only on the row count, so the order of
// floating additions does too.
//
// The mean is real_sum / count, real_sum being the values added as doubles: an integer column's
// Acc sum wraps (pandas' sum does too), but its mean must not ({INT64_MAX, INT64_MAX} has mean
// 9.223372036854776e+18, as numpy's float64 accumulator gives, not -1).
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/frame/column_ops.hpp>

#include "launch_shape.hpp"
#include "numeric_values.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace gpumem::frame {
namespace {

template <class Acc>
struct partial {
  unsigned long long count;
  Acc sum;
  Acc min;
  Acc max;
  double real_sum;  // the same values added as doubles, for the mean (never wraps)

  GPUMEM_HD void add_value(Acc v) {
    if (count == 0) {
      min = v;
      max = v;
    } else {
      min = v < min ? v : min;
      max = v > max ? v : max;
    }
    sum = detail::add(sum, v);
    real_sum += static_cast<double>(v);
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
    sum = detail::add(sum, p.sum);
    real_sum += p.real_sum;
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
    partial<Acc> p{0, Acc{}, Acc{}, Acc{}, 0.0};
    for (std::size_t i = t.global(); i < items; i += t.total()) {
      if (partials != nullptr) {
        p.add_partial(partials[i]);
      } else if (in.is_valid(i)) {
        Acc v{};
        if (detail::load<Acc>(in, i, v)) p.add_value(v);
      }
    }
    out[t.global()] = p;
  }
};

constexpr std::size_t items_per_thread = 32;

// Threads for `items` items: about one per 32, at most max_threads, a whole number of blocks
// (one thread, one block for the smallest).
launch_config shape(std::size_t items) {
  return detail::covering(
      std::min(detail::max_threads, (items + items_per_thread - 1) / items_per_thread));
}

template <class Acc>
partial<Acc> fold(column const& c) {
  partial<Acc> result{0, Acc{}, Acc{}, Acc{}, 0.0};
  if (c.empty()) return result;
  spill_lock lock;  // the column's buffers: on the device for the passes, not exposed
  column_device_view const view = column_device_view::create(c);
  std::size_t items = c.size();
  buffer input;  // the previous pass's partials
  for (bool first = true;; first = false) {
    launch_config const config = shape(items);
    std::size_t const threads = detail::threads_of(config);
    buffer out(threads * sizeof(partial<Acc>));
    reduce_kernel<Acc> const k{
        view, first ? nullptr : static_cast<partial<Acc> const*>(input.get_ptr(access::read)),
        items, static_cast<partial<Acc>*>(out.get_ptr(access::write))};
    gpumem::launch(config, k);
    detail::synchronize();
    input = std::move(out);
    items = threads;
    if (threads == 1) break;
  }
  input.copy_to_host(&result, sizeof(result));
  return result;
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
      return make_scalar<Acc>(detail::sum_type(t), p.count == 0 ? Acc{} : p.sum);
    case reduction::min:
      return p.count == 0 ? scalar::null(t) : make_scalar<Acc>(t, p.min);
    case reduction::max:
      return p.count == 0 ? scalar::null(t) : make_scalar<Acc>(t, p.max);
    case reduction::mean:
      if (p.count == 0) return scalar::null(type_id::float64);
      return scalar::of(p.real_sum / static_cast<double>(p.count));
  }
  return scalar::null(t);
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
  detail::check_numeric(c, to_string(op));
  return detail::with_accumulator(c.type().id(),
                                  [&](auto zero) { return reduce_as<decltype(zero)>(c, op); });
}

}  // namespace gpumem::frame
