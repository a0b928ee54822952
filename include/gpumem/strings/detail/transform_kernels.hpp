// gpumem/strings/detail/transform_kernels.hpp
//
// The UDF kernel of strings::transform (strings/transform.hpp): one thread per row checks that
// every input row's offsets are a range of its characters, builds the arguments (string_view, or
// nullable_string for UDFs that take nulls), calls the UDF and fills the row's result slot
// (detail/gather.hpp). Not API.
#pragma once

#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/strings/detail/gather.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/udf_result.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace gpumem::strings::detail {

// One input column as the kernel reads it, with its character count for the range check.
struct input_rows {
  strings_column_device_view view;
  std::int64_t char_bytes = 0;
};

// T once per index (a struct, not an alias template: nvcc's host pass drops the pack of an alias).
template <class T, std::size_t>
struct repeat_type {
  using type = T;
};

template <class F, class Seq>
struct takes_views;
template <class F, std::size_t... I>
struct takes_views<F, std::index_sequence<I...>>
    : std::is_invocable<F const&, typename repeat_type<string_view, I>::type...> {};

template <class F, class Seq>
struct takes_nullables;
template <class F, std::size_t... I>
struct takes_nullables<F, std::index_sequence<I...>>
    : std::is_invocable<F const&, typename repeat_type<nullable_string, I>::type...> {};

template <class F, std::size_t N, std::size_t... I>
GPUMEM_HD udf_result call_udf(F const& f, string_view const (&args)[N], bool const (&valid)[N],
                              std::index_sequence<I...>) {
  if constexpr (takes_views<F, std::index_sequence<I...>>::value) {
    (void)valid;
    return f(args[I]...);
  } else {
    static_assert(takes_nullables<F, std::index_sequence<I...>>::value,
                  "strings::transform: the UDF must take one string_view, or one nullable_string, "
                  "per input column");
    return f(nullable_string{valid[I] ? args[I] : string_view(), valid[I]}...);
  }
}

template <class F, std::size_t N>
struct udf_kernel {
  F udf;
  input_rows inputs[N];
  row_results results;
  transform_counters* counters;

  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const row = t.global();
    if (row >= results.rows) return;
    results.meminfo[row] = nullptr;
    results.data[row] = nullptr;
    string_view args[N];
    bool valid[N];
    bool any_null = false;
    for (std::size_t k = 0; k < N; ++k) {
      strings_column_device_view const& in = inputs[k].view;
      std::size_t const entry = in.offset() + row;
      std::int64_t const begin = in.offset_entry(entry);
      std::int64_t const end = in.offset_entry(entry + 1);
      if (begin < 0 || end < begin || end > inputs[k].char_bytes) {
        record_malformed_row(counters, static_cast<unsigned>(k), row);
        results.bytes[row] = row_failed;
        return;
      }
      string_element const e = in.element(row);
      args[k] = string_view(e.data, e.bytes);
      valid[k] = in.is_valid(row);
      any_null = any_null || !valid[k];
    }
    using seq = std::make_index_sequence<N>;
    if (any_null && takes_views<F, seq>::value) {
      results.bytes[row] = row_null;
      return;
    }
    udf_result const r = call_udf<F, N>(udf, args, valid, seq{});
    switch (r.state()) {
      case udf_result::kind::null:
        results.bytes[row] = row_null;
        break;
      case udf_result::kind::failed:
        record_failed_row(counters, static_cast<unsigned>(r.error()));
        results.bytes[row] = row_failed;
        break;
      case udf_result::kind::view:
      case udf_result::kind::managed:
        results.meminfo[row] = r.meminfo();
        results.data[row] = r.view().data();
        results.bytes[row] = r.view().size_bytes();
        break;
    }
  }
};

}  // namespace gpumem::strings::detail
