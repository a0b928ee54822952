// column_ops: reductions and cumsum against answers computed on the host (nulls, NaN, empty, one
// row, many blocks), deep copies and writes into rows (copy on write).
#include <expect_error.hpp>

#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/column_ops.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::type_id;
using gpumem::frame::reduce;
using gpumem::frame::reduction;
using gpumem::frame::scalar;
using gpumem::test::expect_logic_error;

template <class T>
using opt_vec = std::vector<std::optional<T>>;

// Host answers: sum, min, max and mean over the valid, non-NaN rows.
template <class T, class Acc>
struct host_answer {
  Acc sum{};
  std::optional<T> min, max;
  std::size_t count = 0;
  explicit host_answer(opt_vec<T> const& v) {
    for (auto const& x : v) {
      if (!x) continue;
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(*x)) continue;
      }
      sum = static_cast<Acc>(sum + static_cast<Acc>(*x));
      min = !min || *x < *min ? *x : *min;
      max = !max || *x > *max ? *x : *max;
      ++count;
    }
  }
};

template <class T>
opt_vec<T> random_values(std::size_t n, std::uint32_t seed, double null_rate, T lo, T hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  opt_vec<T> v(n);
  for (auto& x : v) {
    if (u(gen) < null_rate) continue;
    x = static_cast<T>(lo + (hi - lo) * u(gen));
  }
  return v;
}

TEST(reductions, int32_with_nulls_many_blocks) {
  for (std::size_t n : {1u, 2u, 31u, 33u, 1000u, 300007u}) {
    auto const v =
        random_values<std::int32_t>(n, 7 + static_cast<std::uint32_t>(n), 0.1, -1000000, 1000000);
    column const c = column::from_host(v);
    host_answer<std::int32_t, std::int64_t> const want(v);
    scalar const sum = reduce(c, reduction::sum);
    EXPECT_EQ(sum.type().id(), type_id::int64);
    EXPECT_EQ(sum.value<std::int64_t>(), want.sum) << n;
    EXPECT_EQ(reduce(c, reduction::min).value<std::int32_t>(), want.min) << n;
    EXPECT_EQ(reduce(c, reduction::max).value<std::int32_t>(), want.max) << n;
    scalar const mean = reduce(c, reduction::mean);
    EXPECT_EQ(mean.type().id(), type_id::float64);
    if (want.count == 0) {
      EXPECT_FALSE(mean.is_valid());
    } else {
      EXPECT_NEAR(*mean.value<double>(), static_cast<double>(want.sum) / want.count, 1e-9);
    }
  }
}

TEST(reductions, int64_large_across_passes) {
  std::size_t const n = 1000003;  // more rows than 32 x the thread cap: several passes
  opt_vec<std::int64_t> v(n);
  std::int64_t want = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 97 == 5) continue;
    v[i] = static_cast<std::int64_t>(i) * 3 - 1000000;
    want += *v[i];
  }
  column const c = column::from_host(v);
  EXPECT_EQ(reduce(c, reduction::sum).value<std::int64_t>(), want);
  EXPECT_EQ(reduce(c, reduction::min).value<std::int64_t>(), -1000000);
  EXPECT_EQ(reduce(c, reduction::max).value<std::int64_t>(),
            static_cast<std::int64_t>(n - 1) * 3 - 1000000);
  // A slice starting at an odd row reduces only its rows.
  column const part = c.slice(5, 10);  // rows 5..9; row 5 is null
  std::int64_t part_sum = 0;
  for (std::size_t i = 6; i < 10; ++i)
    part_sum += *v[i];
  EXPECT_EQ(reduce(part, reduction::sum).value<std::int64_t>(), part_sum);
  EXPECT_EQ(reduce(part, reduction::min).value<std::int64_t>(), *v[6]);
}

TEST(reductions, floats_skip_nulls_and_nan) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  column const d = column::from_host(opt_vec<double>{1.5, std::nullopt, nan, -2.25, 4.0});
  EXPECT_EQ(reduce(d, reduction::sum).value<double>(), 3.25);
  EXPECT_EQ(reduce(d, reduction::min).value<double>(), -2.25);
  EXPECT_EQ(reduce(d, reduction::max).value<double>(), 4.0);
  EXPECT_DOUBLE_EQ(*reduce(d, reduction::mean).value<double>(), 3.25 / 3);

  auto const v = random_values<float>(200001, 3, 0.2, -10.f, 10.f);
  column const f = column::from_host(v);
  host_answer<float, double> const want(v);
  scalar const sum = reduce(f, reduction::sum);
  EXPECT_EQ(sum.type().id(), type_id::float32);
  EXPECT_NEAR(*sum.value<float>(), want.sum, 1e-3 * std::abs(want.sum) + 1);
  EXPECT_EQ(reduce(f, reduction::min).value<float>(), want.min);
  EXPECT_EQ(reduce(f, reduction::max).value<float>(), want.max);
  EXPECT_NEAR(*reduce(f, reduction::mean).value<double>(), want.sum / want.count, 1e-6);
  // The order of additions depends on the row count only: the same bits every time.
  EXPECT_EQ(*reduce(f, reduction::sum).value<float>(), *sum.value<float>());
}

TEST(reductions, empty_all_null_one_row) {
  column const empty = column::from_host(std::vector<std::int32_t>{});
  EXPECT_EQ(reduce(empty, reduction::sum).value<std::int64_t>(), 0);
  EXPECT_FALSE(reduce(empty, reduction::min).is_valid());
  EXPECT_FALSE(reduce(empty, reduction::max).is_valid());
  EXPECT_FALSE(reduce(empty, reduction::mean).is_valid());
  EXPECT_EQ(reduce(empty, reduction::min).type().id(), type_id::int32);

  column const nulls = column::from_host(opt_vec<double>{std::nullopt, std::nullopt});
  EXPECT_EQ(reduce(nulls, reduction::sum).value<double>(), 0.0);
  EXPECT_FALSE(reduce(nulls, reduction::max).is_valid());
  EXPECT_EQ(reduce(nulls, reduction::max).to_string(), "<NA>");

  column const one = column::from_host(std::vector<std::uint16_t>{65535});
  EXPECT_EQ(reduce(one, reduction::sum).value<std::uint64_t>(), 65535u);
  EXPECT_EQ(reduce(one, reduction::min).value<std::uint16_t>(), 65535);
  EXPECT_EQ(reduce(one, reduction::mean).value<double>(), 65535.0);
}

// The mean adds in double whatever the column type: an integer column whose integer sum wraps
// still has its true mean (pandas: pd.Series([2**63 - 1] * 2).mean() == 9.223372036854776e+18).
TEST(reductions, integer_mean_does_not_wrap) {
  auto const big = std::numeric_limits<std::int64_t>::max();
  column const i64 = column::from_host(std::vector<std::int64_t>{big, big});
  EXPECT_EQ(reduce(i64, reduction::sum).value<std::int64_t>(), -2);  // the sum wraps, as NumPy
  EXPECT_EQ(reduce(i64, reduction::mean).value<double>(), static_cast<double>(big));
  auto const low = std::numeric_limits<std::int64_t>::min();
  column const negative = column::from_host(opt_vec<std::int64_t>{low, std::nullopt, low, low});
  EXPECT_EQ(reduce(negative, reduction::mean).value<double>(), static_cast<double>(low));
  column const u64 = column::from_host(std::vector<std::uint64_t>{1ull << 63, 1ull << 63, ~0ull});
  EXPECT_EQ(reduce(u64, reduction::mean).value<double>(),
            (2 * 9223372036854775808.0 + 18446744073709551615.0) / 3);
  // Many rows, so that the partials of several threads and passes are folded.
  std::vector<std::int64_t> const many(100000, big - 7);
  EXPECT_EQ(reduce(column::from_host(many), reduction::mean).value<double>(),
            static_cast<double>(big - 7));
  // Small integers keep an exact mean.
  column const small = column::from_host(std::vector<std::int32_t>{-1, -2});
  EXPECT_EQ(reduce(small, reduction::mean).value<double>(), -1.5);
}

TEST(reductions, types_and_errors) {
  column const b = column::from_host(opt_vec<bool>{true, false, std::nullopt, true});
  EXPECT_EQ(reduce(b, reduction::sum).value<std::int64_t>(), 2);
  EXPECT_EQ(reduce(b, reduction::min).value<bool>(), false);
  EXPECT_EQ(reduce(b, reduction::max).value<bool>(), true);
  column const u = column::from_host(std::vector<std::uint64_t>{~0ull, 2});
  EXPECT_EQ(reduce(u, reduction::sum).value<std::uint64_t>(), 1u);  // wraps, as NumPy
  EXPECT_EQ(reduce(u, reduction::max).value<std::uint64_t>(), ~0ull);
  column const i8 = column::from_host(std::vector<std::int8_t>{-128, 127, 127});
  EXPECT_EQ(reduce(i8, reduction::sum).value<std::int64_t>(), 126);
  EXPECT_EQ(reduce(i8, reduction::min).value<std::int8_t>(), -128);

  column const s = gpumem::strings_column_from_host(std::vector<std::string>{"a"});
  expect_logic_error([&] { (void)reduce(s, reduction::sum); },
                     "sum: a string column has no numeric values");
  expect_logic_error([&] { (void)gpumem::frame::cumsum(s); }, "cumsum: a string column");
  expect_logic_error([&] { (void)reduce(i8, reduction::sum).value<std::int8_t>(); },
                     "the scalar holds a int64 value, not int8");
}

TEST(cumsum, nulls_stay_null_and_sum_continues) {
  column const c = column::from_host(opt_vec<std::int32_t>{1, std::nullopt, 3, -10, std::nullopt});
  column const r = gpumem::frame::cumsum(c);
  EXPECT_EQ(r.type().id(), type_id::int64);
  EXPECT_EQ(r.to_host<std::int64_t>(),
            (opt_vec<std::int64_t>{1, std::nullopt, 4, -6, std::nullopt}));
  EXPECT_EQ(r.null_count(), 2u);

  double const nan = std::numeric_limits<double>::quiet_NaN();
  auto const f = gpumem::frame::cumsum(column::from_host(std::vector<double>{0.5, nan, 1.0}));
  EXPECT_FALSE(f.nullable());
  auto const fv = f.to_host<double>();
  EXPECT_EQ(fv[0], 0.5);
  EXPECT_TRUE(std::isnan(*fv[1]));
  EXPECT_EQ(fv[2], 1.5);

  auto const e = gpumem::frame::cumsum(column::from_host(std::vector<float>{}));
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.type().id(), type_id::float32);
  auto const u = gpumem::frame::cumsum(column::from_host(std::vector<std::uint8_t>{200, 100}));
  EXPECT_EQ(u.to_host<std::uint64_t>(), (opt_vec<std::uint64_t>{200, 300}));
}

TEST(cumsum, large_with_nulls_against_host) {
  for (std::size_t n : {1u, 32u, 33u, 4097u, 600011u}) {
    auto const v =
        random_values<std::int64_t>(n, 11 + static_cast<std::uint32_t>(n), 0.05, -5000, 5000);
    column const c = column::from_host(v);
    opt_vec<std::int64_t> want(n);
    std::int64_t running = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!v[i]) continue;
      running += *v[i];
      want[i] = running;
    }
    EXPECT_EQ(gpumem::frame::cumsum(c).to_host<std::int64_t>(), want) << n;
    // A slice at an unaligned offset: the sums start again at its first row.
    if (n > 40) {
      column const part = c.slice(7, n - 3);
      opt_vec<std::int64_t> want_part(part.size());
      std::int64_t s = 0;
      for (std::size_t i = 0; i < part.size(); ++i) {
        if (!v[i + 7]) continue;
        s += *v[i + 7];
        want_part[i] = s;
      }
      EXPECT_EQ(gpumem::frame::cumsum(part).to_host<std::int64_t>(), want_part) << n;
    }
  }
}

TEST(column_copy, fixed_width_slice_and_strings_share_characters) {
  column const c = column::from_host(opt_vec<std::int16_t>{1, std::nullopt, 3, 4, std::nullopt, 6});
  column const part = c.slice(1, 5);
  column const copy = part.copy();
  EXPECT_FALSE(copy.data().owns_same_memory(c.data()));
  EXPECT_FALSE(copy.null_mask().owns_same_memory(c.null_mask()));
  EXPECT_EQ(copy.offset(), 1u);  // from the mask word holding row 0: no shift of the mask
  EXPECT_EQ(copy.to_host<std::int16_t>(), part.to_host<std::int16_t>());
  EXPECT_EQ(copy.null_count(), 2u);
  column const no_mask = column::from_host(std::vector<std::int32_t>{1, 2, 3, 4}).slice(2, 4);
  column const compact = no_mask.copy();
  EXPECT_EQ(compact.offset(), 0u);
  EXPECT_EQ(compact.data().size(), 2 * sizeof(std::int32_t));
  EXPECT_EQ(compact.to_host<std::int32_t>(), (opt_vec<std::int32_t>{3, 4}));

  // Strings: offsets and mask copied, the immutable characters shared.
  column const s = gpumem::strings_column_from_host(
      {std::string("ab"), std::nullopt, std::string("cde"), std::string("")});
  column const s_copy = s.slice(1, 4).copy();
  EXPECT_TRUE(s_copy.data().owns_same_memory(s.data()));
  EXPECT_FALSE(s_copy.child(0).data().owns_same_memory(s.child(0).data()));
  EXPECT_FALSE(s_copy.null_mask().owns_same_memory(s.null_mask()));
  EXPECT_EQ(s_copy.to_host_strings(), s.slice(1, 4).to_host_strings());
  EXPECT_EQ(column().copy().size(), 0u);

  // A copy keeps the buffers' options.
  gpumem::buffer_options cow;
  cow.copy_on_write = true;
  column const w = column::from_host(std::vector<std::int64_t>{1, 2}, cow);
  EXPECT_TRUE(w.copy().data().is_copy_on_write());
}

// A buffer's address, taken inside a spill lock: looked at, not exposed.
void const* address(gpumem::buffer const& b) {
  gpumem::spill_lock lock;
  return b.get_ptr(gpumem::access::read);
}

TEST(write_rows, in_place_when_alone_copy_when_shared) {
  gpumem::buffer_options cow;
  cow.copy_on_write = true;
  column c = column::from_host(std::vector<std::int32_t>{1, 2, 3, 4, 5}, cow);
  void const* before = address(c.data());
  gpumem::frame::write_rows(c, 1, column::from_host(std::vector<std::int32_t>{20, 30}));
  EXPECT_EQ(address(c.data()), before);  // nobody else held it: in place
  EXPECT_FALSE(c.data().is_exposed());
  EXPECT_EQ(c.to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 20, 30, 4, 5}));
  // Values without nulls (even with a mask) give the column no mask.
  gpumem::frame::write_rows(c, 4, column::from_host(opt_vec<std::int32_t>{5}));
  EXPECT_FALSE(c.nullable());

  column const sibling = c;  // a shallow copy shares the buffer
  gpumem::frame::write_rows(c, 0, column::from_host(opt_vec<std::int32_t>{std::nullopt}));
  EXPECT_NE(address(c.data()), before);
  EXPECT_FALSE(c.data().owns_same_memory(sibling.data()));
  EXPECT_EQ(c.to_host<std::int32_t>(), (opt_vec<std::int32_t>{std::nullopt, 20, 30, 4, 5}));
  EXPECT_EQ(c.null_count(), 1u);
  EXPECT_EQ(sibling.to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 20, 30, 4, 5}));
  EXPECT_FALSE(sibling.nullable());

  // A column of plain buffers is copied into copy-on-write ones on its first write.
  column plain = column::from_host(std::vector<std::int32_t>{1, 2, 3});
  column const plain_sibling = plain;
  gpumem::frame::write_rows(plain, 0, column::from_host(std::vector<std::int32_t>{9}));
  EXPECT_TRUE(plain.data().is_copy_on_write());
  EXPECT_EQ(plain.to_host<std::int32_t>(), (opt_vec<std::int32_t>{9, 2, 3}));
  EXPECT_EQ(plain_sibling.to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 2, 3}));

  // A view (a slice) is never written in place: its parent keeps its values.
  column view = sibling.slice(2, 5);
  gpumem::frame::write_rows(view, 2, column::from_host(std::vector<std::int32_t>{-5}));
  EXPECT_EQ(view.to_host<std::int32_t>(), (opt_vec<std::int32_t>{30, 4, -5}));
  EXPECT_EQ(sibling.to_host<std::int32_t>()[4], 5);
}

// The copy is a kernel: a target in pinned host memory is refused, as column_device_view refuses
// pinned values (it was written on the host backend only).
TEST(write_rows, a_target_in_pinned_host_memory_is_refused) {
  column c = column::from_host(std::vector<std::int32_t>{1, 2, 3}, gpumem::buffer_memory::pinned);
  gpumem::test::expect_logic_error(
      [&] { gpumem::frame::write_rows(c, 0, column::from_host(std::vector<std::int32_t>{9})); },
      "write_rows: the target's data buffer is in pinned host memory");
  EXPECT_EQ(c.to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 2, 3}));
}

// A column exposed outside a spill lock (here by a kernel view, as a user's launch makes one) is
// written in place, so a view of it as the values overlaps the rows written: the values are
// staged first, as NumPy's a[1:6] = a[0:5] and the array layer's overlapping copies. Both
// directions, across many mask words (one thread per word), nulls moving with their rows, and a
// shift whose elements are apart but whose mask words are shared.
TEST(write_rows, overlapping_rows_of_an_exposed_column_are_staged) {
  gpumem::buffer_options cow;
  cow.copy_on_write = true;
  column c = column::from_host(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, cow);
  (void)gpumem::column_device_view::create(c);  // outside a lock: exposed
  ASSERT_TRUE(c.data().is_exposed());
  void const* before = address(c.data());
  gpumem::frame::write_rows(c, 1, c.slice(0, 5));
  EXPECT_EQ(address(c.data()), before);  // in place, where the exporter sees it
  EXPECT_EQ(c.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 1, 2, 3, 4, 5}));

  struct shift {
    std::size_t to, from, count;
  };
  for (shift const m : {shift{7, 0, 150}, shift{0, 9, 150}, shift{0, 40, 40}, shift{33, 1, 160}}) {
    opt_vec<std::int64_t> model(200);
    for (std::size_t i = 0; i < model.size(); ++i)
      if (i % 7 != 3) model[i] = static_cast<std::int64_t>(i) + 1;
    column d = column::from_host(model, cow);
    (void)gpumem::column_device_view::create(d);
    ASSERT_TRUE(d.null_mask().is_exposed());
    gpumem::frame::write_rows(d, m.to, d.slice(m.from, m.from + m.count));
    opt_vec<std::int64_t> const moved(
        model.begin() + static_cast<std::ptrdiff_t>(m.from),
        model.begin() + static_cast<std::ptrdiff_t>(m.from + m.count));
    std::copy(moved.begin(), moved.end(), model.begin() + static_cast<std::ptrdiff_t>(m.to));
    EXPECT_EQ(d.to_host<std::int64_t>(), model) << "rows " << m.from << ".. to " << m.to;
    std::size_t nulls = 0;
    for (auto const& x : model)
      nulls += x ? 0 : 1;
    EXPECT_EQ(d.null_count(), nulls) << "rows " << m.from << ".. to " << m.to;
  }
}

TEST(write_rows, masks_across_words_and_errors) {
  std::size_t const n = 100;
  opt_vec<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    if (i % 3 != 0) v[i] = static_cast<std::int64_t>(i);
  column c = column::from_host(v);
  opt_vec<std::int64_t> values(50);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (i % 2 == 0) values[i] = -static_cast<std::int64_t>(i);
  gpumem::frame::write_rows(c, 30, column::from_host(values));  // rows 30..79: words 0..2
  for (std::size_t i = 0; i < values.size(); ++i)
    v[30 + i] = values[i];
  EXPECT_EQ(c.to_host<std::int64_t>(), v);

  column d = column::from_host(std::vector<double>{1, 2});
  expect_logic_error(
      [&] {
        gpumem::frame::write_rows(d, 1, column::from_host(std::vector<double>{1, 2}));
      },
      "rows [1, 1 + 2) are outside the column of 2 rows");
  expect_logic_error(
      [&] { gpumem::frame::write_rows(d, 0, column::from_host(std::vector<float>{1})); },
      "the column holds float64 values, not float32");
  column s = gpumem::strings_column_from_host(std::vector<std::string>{"a"});
  expect_logic_error([&] { gpumem::frame::write_rows(s, 0, s); }, "cannot be written in place");
}

}  // namespace
