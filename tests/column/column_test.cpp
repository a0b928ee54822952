// Fixed-width columns: round trips of every type, slices of slices, null counts (slices whose
// offset is not a multiple of 8 included), empty and all-null columns, the type check, slices of
// exposed copy-on-write columns (views, as any slice) and their null counts (never cached), and
// deep copies keeping an opt-out of
// spilling under a global spill manager.
#include "column_test_support.hpp"

#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

template <class T>
void expect_round_trip(std::vector<std::optional<T>> const& rows) {
  column const c = column::from_host(rows);
  EXPECT_EQ(c.type(), type_to_id<T>());
  EXPECT_EQ(c.size(), rows.size());
  EXPECT_TRUE(c.nullable());
  EXPECT_EQ(c.null_count(), test::model_nulls(rows, 0, rows.size()));
  EXPECT_EQ(c.to_host<T>(), rows);
}

TEST(column, round_trip_of_every_fixed_width_type) {
  expect_round_trip<std::int8_t>({-128, std::nullopt, 127});
  expect_round_trip<std::int16_t>({-32768, 7, std::nullopt});
  expect_round_trip<std::int32_t>({std::nullopt, std::numeric_limits<std::int32_t>::min(), 1});
  expect_round_trip<std::int64_t>({std::numeric_limits<std::int64_t>::max(), std::nullopt});
  expect_round_trip<std::uint8_t>({255, 0, std::nullopt});
  expect_round_trip<std::uint16_t>({65535, std::nullopt});
  expect_round_trip<std::uint32_t>({std::nullopt, 4000000000u});
  expect_round_trip<std::uint64_t>({std::numeric_limits<std::uint64_t>::max(), 3});
  expect_round_trip<float>({1.5f, std::nullopt, -0.25f});
  expect_round_trip<double>({std::nullopt, 1e300, -2.5});
  expect_round_trip<bool>({true, std::nullopt, false, true});
}

TEST(column, values_without_nulls_have_no_mask) {
  column const c = column::from_host(std::vector<double>{1.0, 2.0, 3.0});
  EXPECT_FALSE(c.nullable());
  EXPECT_EQ(c.null_count(), 0u);
  EXPECT_FALSE(c.has_nulls());
  EXPECT_TRUE(c.null_mask().empty());
  EXPECT_EQ(c.data().size(), 24u);
  EXPECT_EQ(c.to_host<double>(), (std::vector<std::optional<double>>{1.0, 2.0, 3.0}));
  column const flags = column::from_host(std::vector<bool>{true, false, true});
  EXPECT_EQ(flags.type(), type_id::bool8);
  EXPECT_EQ(flags.to_host<bool>(), (std::vector<std::optional<bool>>{true, false, true}));
}

TEST(column, mask_is_padded_to_64_bytes) {
  column const c = column::from_host(test::random_ints(1000, 0.1, 1));
  EXPECT_EQ(c.data().size(), 4000u);
  EXPECT_EQ(c.null_mask().size(), 128u);  // the spec's example: 1000 bits padded to 64 bytes
}

TEST(column, slices_of_slices_share_buffers_and_count_their_nulls) {
  auto const rows = test::random_ints(300, 0.3, 2);
  column const c = column::from_host(rows);
  column const a = c.slice(3, 270);    // offset 3: not a multiple of 8
  column const b = a.slice(38, 200);   // rows [41, 203) of c
  column const d = b.slice(100, 101);  // row 141 alone
  EXPECT_EQ(b.offset(), 41u);
  EXPECT_EQ(b.size(), 162u);
  EXPECT_TRUE(b.data().owns_same_memory(c.data()));
  EXPECT_EQ(b.data().get_ptr(access::read), c.data().get_ptr(access::read));  // not copied
  EXPECT_EQ(a.null_count(), test::model_nulls(rows, 3, 270));
  EXPECT_EQ(b.null_count(), test::model_nulls(rows, 41, 203));
  EXPECT_EQ(d.null_count(), rows[141] ? 0u : 1u);
  EXPECT_EQ(b.to_host<int>(),
            std::vector<std::optional<int>>(rows.begin() + 41, rows.begin() + 203));
  EXPECT_EQ(d.to_host<int>(), std::vector<std::optional<int>>{rows[141]});
}

TEST(column, null_counts_of_random_slices_match_a_model) {
  std::mt19937 rng(3);
  auto const rows = test::random_ints(777, 0.4, 4);
  column const c = column::from_host(rows);
  for (int round = 0; round < 100; ++round) {
    std::size_t const begin = rng() % rows.size();
    std::size_t const end = begin + rng() % (rows.size() - begin + 1);
    column const s = c.slice(begin, end);
    ASSERT_EQ(s.null_count(), test::model_nulls(rows, begin, end)) << begin << ".." << end;
    ASSERT_EQ(s.validity_to_host().size(), end - begin);
  }
}

TEST(column, null_count_is_computed_once_for_many_threads) {
  auto const rows = test::random_ints(5000, 0.25, 5);
  std::size_t const expected = test::model_nulls(rows, 7, 4999);
  column const c = column::from_host(rows).slice(7, 4999);  // the count is not known yet
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int k = 0; k < 20; ++k)
        if (c.null_count() != expected) wrong.fetch_add(1);
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
  column const copy = c;  // the cached count travels with copies
  EXPECT_EQ(copy.null_count(), expected);
}

TEST(column, empty_columns) {
  column const none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.null_count(), 0u);
  EXPECT_TRUE(none.to_host<std::int8_t>().empty());
  column const e = column::from_host(std::vector<float>{});
  EXPECT_TRUE(e.empty());
  EXPECT_TRUE(e.to_host<float>().empty());
  EXPECT_TRUE(e.slice(0, 0).empty());
  column const n = column::from_host(std::vector<std::optional<float>>{});
  EXPECT_FALSE(n.nullable());  // no rows, no mask
  EXPECT_EQ(n.null_count(), 0u);
  column const c = column::from_host(std::vector<int>{1, 2, 3});
  EXPECT_TRUE(c.slice(3, 3).to_host<int>().empty());
}

// Moving a column leaves the source empty, as column(): it used to keep its type, size and offset
// while its buffers moved out, so a device view of it had size 3 over a null data pointer (a
// reduction of a moved-from series read address 0).
TEST(column, a_moved_from_column_is_empty) {
  column a = column::from_host(std::vector<std::optional<int>>{1, std::nullopt, 3}).slice(1, 3);
  column const b = std::move(a);
  EXPECT_EQ(b.to_host<int>(), (std::vector<std::optional<int>>{std::nullopt, 3}));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the state moves leave is the point
  EXPECT_EQ(a.offset(), 0u);
  EXPECT_EQ(a.type(), type_id::int8);
  EXPECT_EQ(a.null_count(), 0u);
  EXPECT_TRUE(a.to_host<std::int8_t>().empty());
  EXPECT_EQ(a.copy().size(), 0u);
  column c = column::from_host(std::vector<double>{1, 2});
  column d;
  d = std::move(c);
  EXPECT_EQ(c.size(), 0u);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(c.children().empty());
  EXPECT_TRUE(c.to_host<std::int8_t>().empty());
  EXPECT_EQ(d.to_host<double>(), (std::vector<std::optional<double>>{1, 2}));
}

TEST(column, all_null_columns) {
  std::vector<std::optional<std::int64_t>> const rows(100);
  column const c = column::from_host(rows);
  EXPECT_TRUE(c.nullable());
  EXPECT_EQ(c.null_count(), 100u);
  EXPECT_TRUE(c.has_nulls());
  EXPECT_EQ(c.to_host<std::int64_t>(), rows);
  EXPECT_EQ(c.slice(13, 77).null_count(), 64u);
  EXPECT_EQ(c.slice(13, 77).slice(1, 2).to_host<std::int64_t>().front(), std::nullopt);
}

TEST(column, to_host_names_both_types) {
  column const c = column::from_host(std::vector<std::int32_t>{1});
  test::expect_logic_error([&] { c.to_host<double>(); },
                           "column::to_host: the column holds int32 values, not float64");
  test::expect_logic_error([&] { c.to_host<std::uint32_t>(); }, "int32 values, not uint32");
  test::expect_logic_error([&] { c.to_host_strings(); },
                           "column::to_host_strings: the column holds int32 values, not string");
}

TEST(column, slice_bounds_are_checked) {
  column const c = column::from_host(std::vector<int>{1, 2, 3, 4});
  test::expect_logic_error([&] { c.slice(2, 5); },
                           "column::slice: rows [2, 5) are outside the column of 4 rows");
  test::expect_logic_error([&] { c.slice(3, 2); }, "rows [3, 2)");
  test::expect_logic_error([&] { c.slice(1, 3).slice(0, 3); }, "outside the column of 2 rows");
  test::expect_logic_error([&] { c.child(0); }, "column::child: no child 0 in a column with 0");
}

TEST(column, columns_in_managed_and_pinned_memory) {
  auto const rows = test::random_ints(50, 0.2, 6);
  for (buffer_memory kind : {buffer_memory::managed, buffer_memory::pinned}) {
    column const c = column::from_host(rows, kind);
    EXPECT_EQ(c.data().memory(), kind);
    EXPECT_EQ(c.null_mask().memory(), kind);
    EXPECT_EQ(c.slice(5, 45).to_host<int>(),
              std::vector<std::optional<int>>(rows.begin() + 5, rows.begin() + 45));
  }
}

TEST(column, a_slice_of_an_exposed_copy_on_write_column_is_a_view) {
  buffer_options cow;
  cow.copy_on_write = true;
  auto const rows = test::random_ints(4096, 0.2, 7);
  column const c = column::from_host(rows, cow);
  void const* exported = c.data().get_ptr(access::read);  // a user's export: exposed
  ASSERT_TRUE(c.data().is_exposed());
  column const s = c.slice(10, 11);
  EXPECT_TRUE(s.data().owns_same_memory(c.data()));  // shared, not one row's deep copy
  EXPECT_TRUE(s.null_mask().owns_same_memory(c.null_mask()));
  EXPECT_EQ(s.data().get_ptr(access::read), exported);
  EXPECT_EQ(s.to_host<int>(), std::vector<std::optional<int>>{rows[10]});
  column const whole = c;  // a copy of an exposed column is a true copy (cuDF's rule)
  EXPECT_FALSE(whole.data().owns_same_memory(c.data()));
  EXPECT_EQ(whole.to_host<int>(), c.to_host<int>());
}

// The holder of an exposed mask's address may write it, and so may a write through any column
// sharing it (frame::write_rows writes exposed buffers in place): no handle keeps a count of an
// exposed mask — not the column, its slices (made before or after the export), nor its copies.
TEST(column, the_null_count_of_an_exposed_mask_is_never_cached) {
  buffer_options cow;
  cow.copy_on_write = true;
  column const c = column::from_host(std::vector<std::optional<int>>{1, 2, std::nullopt, 4}, cow);
  column const head = c.slice(0, 2);
  EXPECT_EQ(head.null_count(), 0u);           // counted while the mask is gpumem's alone
  (void)c.null_mask().get_ptr(access::read);  // a user's export: exposed with every slice
  ASSERT_TRUE(head.null_mask().is_exposed());
  column const tail = c.slice(2, 4);
  buffer shared = c.null_mask().slice(0, c.null_mask().size());  // a view: the exposed bytes
  bitmask_word const row_1_valid = 0b0010;                       // rows 0, 2 and 3 null
  backend().copy(shared.get_ptr(access::write), &row_1_valid, sizeof row_1_valid);
  EXPECT_EQ(c.null_count(), 3u);
  EXPECT_EQ(head.null_count(), 1u);
  EXPECT_EQ(head.slice(0, 1).null_count(), 1u);
  EXPECT_EQ(head.slice(1, 2).null_count(), 0u);
  EXPECT_EQ(tail.null_count(), 2u);
  column const copy = head;  // a true copy (of the bytes as they are now): counted afresh
  EXPECT_EQ(copy.null_count(), 1u);
  EXPECT_EQ(head.copy().null_count(), 1u);
  EXPECT_EQ(head.validity_to_host(), (std::vector<bool>{false, true}));
}

TEST(column, copies_keep_an_opt_out_of_spilling) {
  spill_options so;
  so.spill_on_demand = false;
  auto m = std::make_shared<spill_manager>(so);
  set_global_spill_manager(m);
  buffer_options opt_out;
  opt_out.spillable = false;
  auto const rows = test::random_ints(1024, 0.1, 8);
  column const c = column::from_host(rows, opt_out);
  column const copy = c.slice(33, 1000).copy();
  column const adopted = column::from_host(rows).copy();
  set_global_spill_manager(nullptr);
  EXPECT_FALSE(c.data().is_spillable());
  EXPECT_FALSE(copy.data().is_spillable());
  EXPECT_FALSE(copy.null_mask().is_spillable());
  EXPECT_TRUE(adopted.data().is_spillable());
  EXPECT_EQ(copy.to_host<int>(),
            std::vector<std::optional<int>>(rows.begin() + 33, rows.begin() + 1000));
}

}  // namespace
}  // namespace gpumem
