// strings::transform: results, nulls, slices, identity returns, several inputs, and the lifecycle
// of the NRT memory system (balanced statistics after every call, out-of-memory with nothing
// leaked, malformed inputs refused). Failures inside the UDF: transform_failure_test.cu. Runs on
// both backends.
#include "transform_test_support.hpp"

#include <gpumem/strings/combine.hpp>
#include <gpumem/strings/transform.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using gpumem::column;
using gpumem::strings::nullable_string;
using gpumem::strings::string_view;
using gpumem::strings::udf_result;
using gpumem::strings::udf_string;
using gpumem::test::identity;
using gpumem::test::rows_t;
using gpumem::test::spec_udf;  // (s.upper() if len(s) > 2 else s + s) + "abc"
using gpumem::test::transform_test;

struct literal_or_null {  // sees nulls: null -> "<null>" (a view of a literal), "" -> null
  GPUMEM_HD udf_result operator()(nullable_string s) const {
    if (s.is_null()) return string_view("<null>");
    if (s.value.empty()) return udf_result::null();
    return s.value;
  }
};

struct joined {  // a + "-" + b
  GPUMEM_HD udf_result operator()(string_view a, string_view b) const {
    udf_string r(a);
    r += U'-';
    r += b;
    return r;
  }
};

struct joined3 {
  GPUMEM_HD udf_result operator()(string_view a, string_view b, string_view c) const {
    udf_string r(a);
    r += b;
    r += c;
    return r;
  }
};

std::string python_spec(std::string const& s, std::size_t chars, std::string const& upper) {
  return (chars > 2 ? upper : s + s) + "abc";
}

TEST_F(transform_test, spec_udf_matches_python_and_balances) {
  rows_t const in{"hello", "ab", "", "straße", "é", "ﬃx", "日本語", "xy"};
  // Python's answers, written out (upper() of ß is SS, of ﬃ is FFI).
  std::vector<std::string> const expected{
      python_spec("hello", 5, "HELLO"),    python_spec("ab", 2, ""), python_spec("", 0, ""),
      python_spec("straße", 6, "STRASSE"), python_spec("é", 1, ""),  python_spec("ﬃx", 2, ""),
      python_spec("日本語", 3, "日本語"),  python_spec("xy", 2, "")};
  column const c = gpumem::strings_column_from_host(in);
  column const out = gpumem::strings::transform(c, spec_udf{}, with_memsys());
  auto const got = out.to_host_strings();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].has_value()) << i;
    EXPECT_EQ(*got[i], expected[i]) << "row " << i;
  }
  EXPECT_EQ(report_.managed_rows, in.size());
  EXPECT_FALSE(out.nullable());
  gpumem::nrt::memsys_statistics const s = ms_->statistics();
  EXPECT_GE(s.mi_alloc, in.size());  // one managed string per row
  expect_balanced();
}

TEST_F(transform_test, own_memsys_reports_balanced_statistics) {
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"abc", "de", "fgh"});
  gpumem::strings::transform_options o;
  o.statistics = true;
  o.report = &report_;
  column const out = gpumem::strings::transform(c, spec_udf{}, o);
  EXPECT_EQ(out.to_host_strings(), (rows_t{"ABCabc", "dedeabc", "FGHabc"}));
  EXPECT_TRUE(report_.own_memsys);
  ASSERT_TRUE(report_.has_statistics);
  EXPECT_TRUE(report_.statistics.balanced());
  EXPECT_EQ(report_.statistics.mi_alloc, 3u);
  EXPECT_GE(report_.heap_bytes, gpumem::strings::min_heap_bytes / 2);  // less its metadata
}

// Threads calling transform at once, each with the memory system transform makes for it: every
// call sees only its own heap (the calls are serialised; see transform.hpp).
TEST_F(transform_test, concurrent_calls_from_several_threads) {
  constexpr int threads = 4;
  std::vector<rows_t> inputs(threads);
  std::vector<rows_t> expected(threads);
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < 300; ++i) {
      std::string const s =
          std::string(static_cast<std::size_t>(1 + (i + t) % 9), 'a' + t) + std::to_string(i);
      inputs[t].emplace_back(s);
      std::string upper = s;
      for (char& ch : upper)
        if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
      expected[t].emplace_back((s.size() > 2 ? upper : s + s) + "abc");
    }
  }
  std::vector<rows_t> outputs(threads);
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (int round = 0; round < 5; ++round) {
          gpumem::strings::transform_options o;
          o.statistics = true;
          gpumem::strings::transform_report r;
          o.report = &r;
          column const out = gpumem::strings::transform(gpumem::strings_column_from_host(inputs[t]),
                                                        spec_udf{}, o);
          outputs[t] = out.to_host_strings();
          if (!r.statistics.balanced()) errors[t] = "unbalanced statistics";
        }
      } catch (std::exception const& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& th : pool)
    th.join();
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(outputs[t], expected[t]) << "thread " << t;
  }
}

TEST_F(transform_test, nulls_in_give_nulls_out) {
  rows_t const in{"abc", std::nullopt, "x", std::nullopt};
  column const out =
      gpumem::strings::transform(gpumem::strings_column_from_host(in), spec_udf{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"ABCabc", std::nullopt, "xxabc", std::nullopt}));
  EXPECT_EQ(out.null_count(), 2u);
  EXPECT_EQ(report_.null_rows, 2u);
  EXPECT_EQ(report_.managed_rows, 2u);
  expect_balanced();
}

TEST_F(transform_test, nullable_udf_sees_nulls_and_makes_them) {
  rows_t const in{"abc", std::nullopt, "", "z"};
  column const out = gpumem::strings::transform(gpumem::strings_column_from_host(in),
                                                literal_or_null{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"abc", "<null>", std::nullopt, "z"}));
  EXPECT_EQ(out.null_count(), 1u);
  EXPECT_EQ(ms_->statistics().alloc, 0u);
  expect_balanced();
}

TEST_F(transform_test, sliced_input) {
  column const c = gpumem::strings_column_from_host(
      rows_t{"skip", "me", "abcd", std::nullopt, "q", "tail", "end"});
  column const out = gpumem::strings::transform(c.slice(2, 6), spec_udf{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"ABCDabc", std::nullopt, "qqabc", "TAILabc"}));
  expect_balanced();
}

TEST_F(transform_test, identity_returns_allocate_nothing) {
  rows_t const in{"one", "", std::nullopt, "ünïcödé", "four"};
  column const c = gpumem::strings_column_from_host(in);
  column const out = gpumem::strings::transform(c.slice(1, 5), identity{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"", std::nullopt, "ünïcödé", "four"}));
  gpumem::nrt::memsys_statistics const s = ms_->statistics();
  EXPECT_EQ(s.alloc, 0u);
  EXPECT_EQ(s.mi_alloc, 0u);
  EXPECT_EQ(report_.managed_rows, 0u);
  expect_balanced();
}

TEST_F(transform_test, two_and_three_columns) {
  column const a = gpumem::strings_column_from_host(rows_t{"a", "bb", std::nullopt, "d"});
  column const b = gpumem::strings_column_from_host(rows_t{"1", std::nullopt, "3", "44"});
  column const out = gpumem::strings::transform(a, b, joined{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), (rows_t{"a-1", std::nullopt, std::nullopt, "d-44"}));
  expect_balanced();
  column const c = gpumem::strings_column_from_host(rows_t{"x", "y", "z", "w"});
  std::array<std::reference_wrapper<column const>, 3> const three{a, b, c};
  column const out3 = gpumem::strings::transform(three, joined3{}, with_memsys());
  EXPECT_EQ(out3.to_host_strings(), (rows_t{"a1x", std::nullopt, std::nullopt, "d44w"}));
  expect_balanced();
  column const short_column = gpumem::strings_column_from_host(rows_t{"x"});
  EXPECT_THROW(gpumem::strings::transform(a, short_column, joined{}, with_memsys()),
               gpumem::logic_error);
}

TEST_F(transform_test, block_sizes_outside_the_kernels_bound_are_refused) {
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"a", "bb", "ccc"});
  for (unsigned bad : {0u, gpumem::strings::max_transform_block_size + 1}) {
    gpumem::strings::transform_options o = with_memsys();
    o.block_size = bad;
    EXPECT_THROW((void)gpumem::strings::transform(c, spec_udf{}, o), gpumem::logic_error) << bad;
  }
  for (unsigned good : {1u, 32u, gpumem::strings::max_transform_block_size}) {
    gpumem::strings::transform_options o = with_memsys();
    o.block_size = good;
    EXPECT_EQ(gpumem::strings::transform(c, spec_udf{}, o).to_host_strings(),
              (rows_t{"aaabc", "bbbbabc", "CCCabc"}))
        << good;
  }
  expect_balanced();
}

TEST_F(transform_test, empty_and_all_null_columns) {
  column const empty = gpumem::strings_column_from_host(std::vector<std::string>{});
  column const out = gpumem::strings::transform(empty, spec_udf{}, with_memsys());
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(out.type().id(), gpumem::type_id::string);
  column const nulls =
      gpumem::strings_column_from_host(rows_t{std::nullopt, std::nullopt, std::nullopt});
  column const out2 = gpumem::strings::transform(nulls, spec_udf{}, with_memsys());
  EXPECT_EQ(out2.to_host_strings(), (rows_t{std::nullopt, std::nullopt, std::nullopt}));
  EXPECT_EQ(out2.null_count(), 3u);
  EXPECT_EQ(ms_->statistics().alloc, 0u);
  expect_balanced();
}

TEST_F(transform_test, int64_offsets_past_the_limit) {
  std::size_t const previous = gpumem::strings::detail::set_int32_offset_limit(8);
  rows_t in;
  rows_t expected;
  for (int i = 0; i < 200; ++i) {  // more than one chunk of the scan
    if (i % 7 == 3) {
      in.emplace_back();
      expected.emplace_back();
      continue;
    }
    std::string const s = std::to_string(i);
    in.emplace_back(s);
    expected.emplace_back(s.size() > 2 ? s + "abc" : s + s + "abc");
  }
  column const out =
      gpumem::strings::transform(gpumem::strings_column_from_host(in), spec_udf{}, with_memsys());
  gpumem::strings::detail::set_int32_offset_limit(previous);
  EXPECT_TRUE(report_.int64_offsets);
  EXPECT_EQ(out.child(0).type().id(), gpumem::type_id::int64);
  EXPECT_EQ(out.to_host_strings(), expected);
  expect_balanced();
}

TEST_F(transform_test, malformed_column_is_refused_naming_the_row) {
  std::vector<std::int32_t> const offsets{0, 3, 1, 5, 6};
  std::string const chars = "abcdef";
  column const bad = gpumem::detail::unchecked_strings_column(
      4, gpumem::buffer::from_host(offsets.data(), offsets.size() * 4), gpumem::type_id::int32,
      gpumem::buffer::from_host(chars.data(), chars.size()), gpumem::buffer(), 0);
  try {
    (void)gpumem::strings::transform(bad, spec_udf{}, with_memsys());
    FAIL() << "no logic_error";
  } catch (gpumem::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("malformed at row 1"), std::string::npos) << what;
    EXPECT_NE(what.find("[3, 1)"), std::string::npos) << what;
  }
  expect_balanced();
}

TEST_F(transform_test, an_offsets_child_that_is_a_slice_is_read_at_its_offset) {
  // A strings column whose offsets child is a slice of a larger offsets column: the heap is sized
  // from the characters its rows span, and a malformed row is named with its own offsets.
  std::string const text(256 * gpumem::KiB, 'a');  // with a factor of 100, above the 16 MiB floor
  gpumem::buffer const chars = gpumem::buffer::from_host(text.data(), text.size());
  std::vector<std::int32_t> const offsets{0, 0, static_cast<std::int32_t>(text.size())};
  gpumem::buffer all = gpumem::buffer::from_host(offsets.data(), offsets.size() * 4);
  column::contents parts;
  parts.type = gpumem::type_id::string;
  parts.size = 1;
  parts.data = chars;
  parts.children.push_back(column(gpumem::type_id::int32, 3, all).slice(1, 3));  // {0, size}
  column const sliced(std::move(parts));
  gpumem::strings::transform_options o;
  o.heap_factor = 100.0;
  EXPECT_GT(gpumem::strings::heap_bytes_for(1, text.size(), o), gpumem::strings::min_heap_bytes);
  EXPECT_EQ(gpumem::strings::heap_bytes_for(sliced, o),
            gpumem::strings::heap_bytes_for(1, text.size(), o));
  column const out = gpumem::strings::transform(sliced, identity{}, with_memsys());
  EXPECT_EQ(out.to_host_strings(), rows_t{text});
  // The row's end moved past the characters after the column's checks.
  std::int32_t const past = static_cast<std::int32_t>(text.size()) + 7;
  gpumem::backend().copy(static_cast<char*>(all.get_ptr(gpumem::access::write)) + 8, &past, 4);
  try {
    (void)gpumem::strings::transform(sliced, identity{}, with_memsys());
    FAIL() << "no logic_error";
  } catch (gpumem::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("[0, " + std::to_string(past) + ")"), std::string::npos) << what;
  }
  expect_balanced();
}

TEST_F(transform_test, the_default_heap_serves_rows_of_every_length) {
  // Results between the heap's small classes and a slab once took a whole 128 KiB slab each (7.8
  // times a 16 KiB+1 result) and ran the default heap out: every length must fit it.
  for (std::size_t const length : {16385u, 20000u, 70000u}) {
    std::vector<std::string> const rows(200, std::string(length, 'x'));
    column const c = gpumem::strings_column_from_host(rows);
    column out;
    ASSERT_NO_THROW(out = gpumem::strings::transform(c, spec_udf{})) << length;
    auto const got = out.to_host_strings();
    ASSERT_EQ(got.size(), rows.size());
    EXPECT_EQ(*got.front(), std::string(length, 'X') + "abc") << length;
  }
}

TEST_F(transform_test, heap_sizing_from_the_input) {
  gpumem::strings::transform_options o;
  o.heap_factor = 2.0;
  o.heap_bytes_per_row = 100;
  std::size_t const rows = 1000000, chars = 30000000;
  std::size_t const body = 2 * chars + 100 * rows;
  EXPECT_EQ(gpumem::strings::heap_bytes_for(rows, chars, o), body + body / 7);
  EXPECT_EQ(gpumem::strings::heap_bytes_for(1, 1, o), gpumem::strings::min_heap_bytes);
  o.heap_bytes = 12345;
  EXPECT_EQ(gpumem::strings::heap_bytes_for(rows, chars, o), 12345u);
  column const c = gpumem::strings_column_from_host(std::vector<std::string>{"abc", "de"});
  EXPECT_EQ(gpumem::strings::heap_bytes_for(c), gpumem::strings::min_heap_bytes);
  o.heap_bytes = 0;
  o.heap_factor = 1e300;  // saturates: creating such a heap is then an out_of_memory
  EXPECT_EQ(gpumem::strings::heap_bytes_for(rows, chars, o), ~std::size_t{0});
  o.heap_factor = -1.5;
  try {
    (void)gpumem::strings::heap_bytes_for(rows, chars, o);
    FAIL() << "no logic_error";
  } catch (gpumem::logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("not -1.5"), std::string::npos) << e.what();
  }
}

}  // namespace
