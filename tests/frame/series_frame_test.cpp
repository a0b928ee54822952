// series and data_frame: construction, views that share memory, deep and shallow copies, writes
// that leave every other holder of the buffers intact (pandas' copy-on-write behaviour), and the
// per-column reductions.
#include <expect_error.hpp>

#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/column_device_view.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/frame/column_ops.hpp>
#include <gpumem/frame/data_frame.hpp>
#include <gpumem/frame/series.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::frame::data_frame;
using gpumem::frame::label;
using gpumem::frame::range_index;
using gpumem::frame::series;
using gpumem::test::expect_logic_error;

template <class T>
using opt_vec = std::vector<std::optional<T>>;

// A buffer's address, taken inside a spill lock: looked at, not exposed.
void const* address(gpumem::buffer const& b) {
  gpumem::spill_lock lock;
  return b.get_ptr(gpumem::access::read);
}

data_frame sample() {
  return data_frame(
      {{"a", column::from_host(opt_vec<std::int32_t>{1, std::nullopt, 3, 4})},
       {"b", column::from_host(std::vector<double>{0.5, 1.5, 2.5, 3.5})},
       {"s", gpumem::strings_column_from_host(std::vector<std::string>{"w", "x", "y", "z"})}});
}

TEST(series, construction_and_index) {
  auto const s = series::from_host<std::int64_t>({{1}, std::nullopt, {3}}, "x");
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.name(), label("x"));
  EXPECT_TRUE(s.index().is_range());
  EXPECT_EQ(s.index().size(), 3u);
  series const t(
      column::from_host(std::vector<float>{1, 2}),
      gpumem::frame::index(gpumem::strings_column_from_host(std::vector<std::string>{"p", "q"})));
  EXPECT_FALSE(t.index().is_range());
  expect_logic_error(
      [] {
        series(column::from_host(std::vector<float>{1, 2}), range_index(3));
      },
      "the index has 3 labels for 2 rows");
  expect_logic_error([&] { (void)s.slice(2, 4); }, "rows [2, 4) are outside the series of 3");
}

// A moved-from series is empty, as series(): its index used to keep its labels over no rows.
TEST(series, a_moved_from_series_is_empty) {
  auto s = series::from_host<std::int64_t>({{1}, std::nullopt, {3}}, "x");
  series t = std::move(s);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.index().size(), 3u);
  EXPECT_EQ(s.size(), 0u);  // NOLINT(bugprone-use-after-move): the state a move leaves is the point
  EXPECT_EQ(s.index().size(), 0u);
  series u;
  u = std::move(t);
  EXPECT_EQ(u.index().size(), 3u);
  EXPECT_EQ(t.index().size(), 0u);  // NOLINT(bugprone-use-after-move)
}

TEST(series, views_share_memory_copies_do_not) {
  auto const s = series::from_host<std::int32_t>({1, 2, 3, 4, 5, 6, 7});
  series const h = s.head(3);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_TRUE(h.values().data().owns_same_memory(s.values().data()));
  EXPECT_EQ(h.to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 2, 3}));
  series const mid = s.slice(2, 5);
  EXPECT_TRUE(mid.values().data().owns_same_memory(s.values().data()));
  EXPECT_EQ(mid.index().range().start(), 2);
  EXPECT_EQ(s.tail(2).to_host<std::int32_t>(), (opt_vec<std::int32_t>{6, 7}));
  EXPECT_EQ(s.head(100).size(), 7u);
  EXPECT_TRUE(s.copy(false).values().data().owns_same_memory(s.values().data()));
  series const deep = s.copy();
  EXPECT_FALSE(deep.values().data().owns_same_memory(s.values().data()));
  EXPECT_EQ(deep.to_host<std::int32_t>(), s.to_host<std::int32_t>());
}

// The example of cuDF's copy-on-write notes: s2 = s1.copy(deep=False); s2[0:2] = 10.
TEST(series, writes_leave_shallow_copies_intact) {
  auto s1 = series::from_host<std::int64_t>({1, 2, 3, 4});
  series s2 = s1.copy(false);
  series s3 = s2.copy(false);
  EXPECT_TRUE(s3.values().data().owns_same_memory(s1.values().data()));
  s2.set_rows<std::int64_t>(0, 2, 10);
  EXPECT_EQ(s2.to_host<std::int64_t>(), (opt_vec<std::int64_t>{10, 10, 3, 4}));
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s3.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(s2.values().data().owns_same_memory(s1.values().data()));
  EXPECT_TRUE(s3.values().data().owns_same_memory(s1.values().data()));
  s1.set_rows<std::int64_t>(0, 2, 11);
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{11, 11, 3, 4}));
  EXPECT_EQ(s3.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s2.to_host<std::int64_t>(), (opt_vec<std::int64_t>{10, 10, 3, 4}));

  // A series alone with its buffer is written in place.
  void const* before = address(s1.values().data());
  s1.set_rows(2, std::vector<std::optional<std::int64_t>>{std::nullopt, 7});
  EXPECT_EQ(address(s1.values().data()), before);
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{11, 11, std::nullopt, 7}));
  s1.set_null(0, 1);
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{std::nullopt, 11, std::nullopt, 7}));
  EXPECT_EQ(s1.values().null_count(), 2u);

  // Writing through a head() view leaves the parent as it was.
  auto parent = series::from_host<std::int64_t>({1, 2, 3});
  series top = parent.head(2);
  top.set_rows<std::int64_t>(0, 1, 9);
  EXPECT_EQ(top.to_host<std::int64_t>(), (opt_vec<std::int64_t>{9, 2}));
  EXPECT_EQ(parent.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3}));
  expect_logic_error([&] { parent.set_rows<std::int32_t>(0, 1, 1); },
                     "the column holds int64 values, not int32");
  expect_logic_error([&] { parent.set_rows<std::int64_t>(2, 4, 1); }, "rows [2, 4) are outside");
}

TEST(series, writes_to_an_exposed_column_go_in_place_and_spare_its_copies) {
  // The exporter holds the pointer: a write goes in place, where it sees it, and a shallow copy
  // made after the export is a true copy, which keeps the old values.
  auto s1 = series::from_host<std::int64_t>({1, 2, 3, 4});
  void const* exported = s1.values().data().get_ptr(gpumem::access::read);  // outside a lock
  ASSERT_TRUE(s1.values().data().is_exposed());
  series s2 = s1.copy(false);
  EXPECT_FALSE(s2.values().data().owns_same_memory(s1.values().data()));
  s2.set_rows<std::int64_t>(0, 2, 10);
  EXPECT_EQ(s2.to_host<std::int64_t>(), (opt_vec<std::int64_t>{10, 10, 3, 4}));
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3, 4}));
  s1.set_rows<std::int64_t>(3, 4, 9);
  EXPECT_EQ(s1.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2, 3, 9}));
  EXPECT_EQ(s2.to_host<std::int64_t>(), (opt_vec<std::int64_t>{10, 10, 3, 4}));
  std::vector<std::int64_t> seen(4);
  gpumem::backend().copy(seen.data(), exported, sizeof(std::int64_t) * seen.size());
  EXPECT_EQ(seen, (std::vector<std::int64_t>{1, 2, 3, 9})) << "the write did not go in place";
}

// The views of an exposed column share its buffers for good, so a write through the parent goes
// in place under them: a view's null count follows it (no handle caches the count of an exposed
// mask), and so does writing the view elsewhere (the null used to become a valid 0).
TEST(series, a_view_of_an_exposed_column_counts_the_nulls_written_through_its_parent) {
  auto s = series::from_host<std::int64_t>({{1}, {2}, std::nullopt, {4}}, "x");
  (void)gpumem::column_device_view::create(s.values());  // a user's kernel view: exposed
  ASSERT_TRUE(s.values().null_mask().is_exposed());
  series const v = s.head(2);
  EXPECT_EQ(v.values().null_count(), 0u);
  s.set_null(0, 1);
  EXPECT_EQ(v.to_host<std::int64_t>(), (opt_vec<std::int64_t>{std::nullopt, 2}));
  EXPECT_EQ(v.values().null_count(), 1u);
  EXPECT_EQ(v.values().slice(0, 1).null_count(), 1u);
  column const copy = v.values();  // a true copy of the exposed buffers, counted afresh
  EXPECT_EQ(copy.null_count(), 1u);
  column t =
      column::from_host(std::vector<std::int64_t>{7, 8}, gpumem::frame::frame_buffer_options());
  gpumem::frame::write_rows(t, 0, v.values());
  EXPECT_EQ(t.to_host<std::int64_t>(), (opt_vec<std::int64_t>{std::nullopt, 2}));
  EXPECT_EQ(t.null_count(), 1u);
}

// Only the mask exposed (its address handed to another library): a write through a view sets the
// shared mask's bits in place, so the data goes in place with them (exposed too): the parent
// shows the value written, not the zero under its old null.
TEST(series, a_write_through_a_view_of_an_exposed_mask_reaches_the_parents_data_too) {
  auto s = series::from_host<std::int64_t>({{1}, std::nullopt, std::nullopt, {4}});
  (void)s.values().null_mask().get_ptr(gpumem::access::read);  // outside a lock: exposed
  ASSERT_TRUE(s.values().null_mask().is_exposed());
  ASSERT_FALSE(s.values().data().is_exposed());
  series v = s.head(4);
  {
    gpumem::spill_lock held;  // the caller's lock does not keep the data from being exposed
    v.set_rows<std::int64_t>(1, 2, 42);
  }
  EXPECT_EQ(v.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 42, std::nullopt, 4}));
  EXPECT_EQ(s.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 42, std::nullopt, 4}));
  EXPECT_TRUE(s.values().data().is_exposed());
  v.set_rows<std::int64_t>(2, 3, 43);
  EXPECT_EQ(s.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 42, 43, 4}));
}

// A row made null in an exposed column that had no mask gets a mask its views do not share; its
// data keeps the old value (a null row's value is unspecified), so the views show the old value,
// never the zero under the null. Valid rows still go in place, where the views see them.
TEST(series, set_null_on_an_exposed_column_leaves_its_views_the_old_values) {
  auto p = series::from_host<std::int64_t>(std::vector<std::int64_t>{1, 2, 3}, "x");
  (void)gpumem::column_device_view::create(p.values());
  ASSERT_TRUE(p.values().data().is_exposed());
  ASSERT_FALSE(p.values().nullable());
  series const w = p.head(2);
  p.set_null(0, 1);
  EXPECT_EQ(p.to_host<std::int64_t>(), (opt_vec<std::int64_t>{std::nullopt, 2, 3}));
  EXPECT_EQ(w.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 2}));  // the old value
  p.set_rows(0, opt_vec<std::int64_t>{std::nullopt, 5});
  EXPECT_EQ(p.to_host<std::int64_t>(), (opt_vec<std::int64_t>{std::nullopt, 5, 3}));
  EXPECT_EQ(w.to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, 5}));
}

TEST(series, reductions_and_cumsum) {
  auto const s = series::from_host<double>({{1.5}, std::nullopt, {2.5}}, "v");
  EXPECT_EQ(s.sum().value<double>(), 4.0);
  EXPECT_EQ(s.min().value<double>(), 1.5);
  EXPECT_EQ(s.max().value<double>(), 2.5);
  EXPECT_EQ(s.mean().value<double>(), 2.0);
  series const c = s.cumsum();
  EXPECT_EQ(c.name(), label("v"));
  EXPECT_EQ(c.to_host<double>(), (opt_vec<double>{1.5, std::nullopt, 4.0}));
}

TEST(data_frame, selection_and_mutation) {
  data_frame df = sample();
  EXPECT_EQ(df.rows(), 4u);
  EXPECT_EQ(df.num_columns(), 3u);
  series const a = df["a"];
  EXPECT_EQ(a.name(), label("a"));
  EXPECT_TRUE(a.values().data().owns_same_memory(df.columns().at("a").data()));
  EXPECT_EQ(df.select({"s", "a"}).columns().label_at(0), label("s"));
  expect_logic_error([&] { (void)df["nope"]; }, "no column labelled nope (columns: [a, b, s])");

  df.insert("c", column::from_host(std::vector<std::int8_t>{1, 1, 1, 1}), 1);
  EXPECT_EQ(df.columns().position_of("c"), 1u);
  expect_logic_error([&] { df.insert("d", column::from_host(std::vector<std::int8_t>{1})); },
                     "the column d has 1 rows; the frame has 4");
  df.rename("c", "cc");
  df.erase("cc");
  EXPECT_EQ(df.num_columns(), 3u);
  df.set_index(gpumem::frame::index(range_index(100, 104)));
  EXPECT_EQ(df["b"].index().range().start(), 100);
  expect_logic_error([&] { df.set_index(range_index(3)); }, "the index has 3 labels; the frame");
  expect_logic_error(
      [] {
        data_frame({{"a", column::from_host(std::vector<std::int8_t>{1, 2})}}, range_index(3));
      },
      "the index has 3 labels for columns of 2 rows");

  data_frame wide({{{"x", "one"}, column::from_host(std::vector<std::int8_t>{1})},
                   {{"x", "two"}, column::from_host(std::vector<std::int8_t>{2})},
                   {{"y", "one"}, column::from_host(std::vector<std::int8_t>{3})}});
  EXPECT_EQ(wide.select_prefix({"x"}).num_columns(), 2u);
}

TEST(data_frame, views_copies_and_writes) {
  data_frame const df = sample();
  data_frame const top = df.head(2);
  EXPECT_EQ(top.rows(), 2u);
  for (std::size_t p = 0; p < df.num_columns(); ++p)
    EXPECT_TRUE(top.columns().at(p).data().owns_same_memory(df.columns().at(p).data())) << p;
  data_frame const mid = df.slice(1, 3);
  EXPECT_EQ(mid["s"].values().to_host_strings(),
            (std::vector<std::optional<std::string>>{"x", "y"}));
  EXPECT_EQ(mid.index().range().start(), 1);
  EXPECT_EQ(df.tail(1)["a"].to_host<std::int32_t>(), (opt_vec<std::int32_t>{4}));

  data_frame const deep = df.copy(true);
  for (std::size_t p = 0; p < df.num_columns(); ++p) {
    // Strings columns share their immutable characters (column::copy), and only those.
    bool const strings = df.columns().at(p).type().id() == gpumem::type_id::string;
    EXPECT_EQ(deep.columns().at(p).data().owns_same_memory(df.columns().at(p).data()), strings)
        << p;
    for (std::size_t k = 0; k < df.columns().at(p).children().size(); ++k)
      EXPECT_FALSE(deep.columns().at(p).child(k).data().owns_same_memory(
          df.columns().at(p).child(k).data()));
  }

  data_frame shallow = df.copy(false);
  EXPECT_TRUE(shallow.columns().at("b").data().owns_same_memory(df.columns().at("b").data()));
  shallow.set_rows<double>("b", 1, 3, -1.0);
  EXPECT_EQ(shallow["b"].to_host<double>(), (opt_vec<double>{0.5, -1.0, -1.0, 3.5}));
  EXPECT_EQ(df["b"].to_host<double>(), (opt_vec<double>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(top["b"].to_host<double>(), (opt_vec<double>{0.5, 1.5}));
  EXPECT_FALSE(shallow.columns().at("b").data().owns_same_memory(df.columns().at("b").data()));
  // Only the written column was copied.
  EXPECT_TRUE(shallow.columns().at("a").data().owns_same_memory(df.columns().at("a").data()));

  // The frame alone with its column: written in place.
  data_frame own = df.copy(true);
  // sample()'s columns are plain buffers (column::from_host): the first write copies them into
  // copy-on-write buffers, which later writes use in place while nothing shares them.
  own.set_rows("a", 0, opt_vec<std::int32_t>{5, 6});
  EXPECT_TRUE(own.columns().at("a").data().is_copy_on_write());
  void const* before = address(own.columns().at("a").data());
  own.set_rows("a", 0, opt_vec<std::int32_t>{7, 8});
  EXPECT_EQ(address(own.columns().at("a").data()), before);
  EXPECT_EQ(own["a"].to_host<std::int32_t>(), (opt_vec<std::int32_t>{7, 8, 3, 4}));
  EXPECT_EQ(own.columns().position_of("a"), 0u);
  expect_logic_error([&] { own.set_rows<std::int32_t>("s", 0, 1, 1); },
                     "strings columns cannot be written in place");
  EXPECT_EQ(own.columns().position_of("s"), 2u);  // left in its place after the error
}

TEST(data_frame, reductions_per_numeric_column) {
  data_frame const df = sample();
  auto const sums = df.sum();
  ASSERT_EQ(sums.size(), 2u);  // the strings column is left out
  EXPECT_EQ(sums[0].name, label("a"));
  EXPECT_EQ(sums[0].value.value<std::int64_t>(), 8);
  EXPECT_EQ(sums[1].value.value<double>(), 8.0);
  EXPECT_EQ(df.min()[0].value.value<std::int32_t>(), 1);
  EXPECT_EQ(df.max()[1].value.value<double>(), 3.5);
  EXPECT_DOUBLE_EQ(*df.mean()[0].value.value<double>(), 8.0 / 3);
  data_frame const running = df.cumsum();
  EXPECT_EQ(running.num_columns(), 2u);
  EXPECT_EQ(running["a"].to_host<std::int64_t>(), (opt_vec<std::int64_t>{1, std::nullopt, 4, 8}));
  EXPECT_EQ(running["b"].to_host<double>(), (opt_vec<double>{0.5, 2.0, 4.5, 8.0}));
  data_frame const none = df.head(0);
  EXPECT_EQ(none.sum()[0].value.value<std::int64_t>(), 0);
  EXPECT_FALSE(none.max()[1].value.is_valid());
}

}  // namespace
