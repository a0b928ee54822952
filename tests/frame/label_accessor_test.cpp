// label and column_accessor: selection by label, position, list and prefix; insertion, deletion,
// renaming; the errors name what is missing or wrong.
#include <expect_error.hpp>

#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/column_accessor.hpp>
#include <gpumem/frame/label.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::frame::column_accessor;
using gpumem::frame::label;
using gpumem::test::expect_logic_error;

column ints(std::vector<std::int32_t> v) {
  return column::from_host(v);
}

std::vector<std::string> names(column_accessor const& ca) {
  std::vector<std::string> out;
  for (auto const& l : ca.labels())
    out.push_back(l.to_string());
  return out;
}

TEST(label, one_level_and_tuples) {
  label a = "a";
  label b{"x", "y"};
  EXPECT_EQ(a, label{"a"});
  EXPECT_EQ(a.levels(), 1u);
  EXPECT_EQ(b.levels(), 2u);
  EXPECT_EQ(b.to_string(), "(x, y)");
  EXPECT_EQ(a.to_string(), "a");
  EXPECT_TRUE(b.starts_with({"x"}));
  EXPECT_FALSE(b.starts_with({"y"}));
  EXPECT_FALSE(a.starts_with(b));
  EXPECT_EQ(b.drop_front(1), label("y"));
  EXPECT_EQ(b[1], "y");
  expect_logic_error([&] { (void)b[2]; }, "level 2 of (x, y), which has 2 levels");
  expect_logic_error([&] { (void)a.drop_front(2); }, "cannot drop 2 levels of a");
  EXPECT_TRUE(label{"a"} < label{"b"});
}

TEST(column_accessor, selects_by_label_position_list_and_range) {
  column_accessor ca({{"a", ints({1, 2})}, {"b", ints({3, 4})}, {"c", ints({5, 6})}});
  EXPECT_EQ(ca.size(), 3u);
  EXPECT_EQ(ca.rows(), 2u);
  EXPECT_EQ(ca.levels(), 1u);
  EXPECT_EQ(ca.at("b").to_host<std::int32_t>()[0], 3);
  EXPECT_EQ(ca.at(2).to_host<std::int32_t>()[1], 6);
  EXPECT_EQ(ca.label_at(0), label("a"));
  EXPECT_EQ(ca.position_of("c"), 2u);
  EXPECT_EQ(names(ca.select({"c", "a"})), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(names(ca.select_positions({1, 0})), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(names(ca.select_range(1, 3)), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(ca.select_range(1, 1).empty());
  // Selections share the columns' buffers.
  EXPECT_TRUE(ca.select({"b"}).at("b").data().owns_same_memory(ca.at("b").data()));

  expect_logic_error([&] { (void)ca.at("zz"); }, "no column labelled zz (columns: [a, b, c])");
  expect_logic_error([&] { (void)ca.at(3); }, "position 3 is past the 3 columns");
  expect_logic_error([&] { (void)ca.select({"a", "nope"}); }, "no column labelled nope");
  expect_logic_error([&] { (void)ca.select({"a", "a"}); }, "a is selected twice");
  expect_logic_error([&] { (void)ca.select_positions({0, 5}); }, "position 5 is past");
  expect_logic_error([&] { (void)ca.select_range(2, 4); }, "positions [2, 4) are outside the 3");
}

TEST(column_accessor, hierarchical_labels_select_by_prefix) {
  column_accessor m(
      {{{"x", "one"}, ints({1})}, {{"x", "two"}, ints({2})}, {{"y", "one"}, ints({3})}});
  EXPECT_EQ(m.levels(), 2u);
  column_accessor const x = m.select_prefix({"x"});
  EXPECT_EQ(names(x), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(x.levels(), 1u);
  EXPECT_EQ(x.at("two").to_host<std::int32_t>()[0], 2);
  // A full label keeps its levels.
  column_accessor const exact = m.select_prefix({"y", "one"});
  EXPECT_EQ(names(exact), (std::vector<std::string>{"(y, one)"}));
  EXPECT_EQ(m.at({"y", "one"}).to_host<std::int32_t>()[0], 3);
  expect_logic_error([&] { (void)m.select_prefix({"z"}); }, "no column labelled z");
  expect_logic_error(
      [&] {
        (void)m.select_prefix({"x", "one", "deep"});
      },
      "the prefix (x, one, deep) has 3 levels; the labels have 2");
  expect_logic_error([&] { m.insert("flat", ints({4})); },
                     "the label flat has 1 levels; the others have 2");
}

TEST(column_accessor, insert_set_pop_rename) {
  column_accessor ca;
  EXPECT_TRUE(ca.empty());
  ca.insert("b", ints({1, 2, 3}));
  ca.insert("a", ints({4, 5, 6}), 0);
  ca.insert("c", ints({7, 8, 9}));
  EXPECT_EQ(names(ca), (std::vector<std::string>{"a", "b", "c"}));
  expect_logic_error([&] { ca.insert("a", ints({0, 0, 0})); }, "a column labelled a exists");
  expect_logic_error(
      [&] {
        ca.insert("d", ints({0, 0}));
      },
      "the column d has 2 rows; the others have 3");
  expect_logic_error([&] { ca.insert("d", ints({0, 0, 0}), 7); }, "position 7 is past the 3");
  expect_logic_error([&] { ca.insert(label(), ints({0, 0, 0})); }, "at least one level");

  ca.set("b", ints({10, 20, 30}));
  EXPECT_EQ(ca.at("b").to_host<std::int32_t>()[2], 30);
  ca.set("d", ints({0, 0, 1}));
  EXPECT_EQ(ca.position_of("d"), 3u);

  column const popped = ca.pop("a");
  EXPECT_EQ(popped.to_host<std::int32_t>()[0], 4);
  EXPECT_EQ(names(ca), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(ca.position_of("c"), 1u);
  expect_logic_error([&] { ca.erase("a"); }, "no column labelled a");

  ca.rename("c", "cc");
  EXPECT_EQ(names(ca), (std::vector<std::string>{"b", "cc", "d"}));
  EXPECT_FALSE(ca.contains("c"));
  expect_logic_error([&] { ca.rename("cc", "d"); }, "a column labelled d exists already");
  expect_logic_error([&] { ca.rename("zz", "y"); }, "no column labelled zz");
  expect_logic_error([&] { ca.rename("b", {"two", "levels"}); }, "has 2 levels");

  ca.erase("b");
  ca.erase("cc");
  ca.erase("d");
  EXPECT_TRUE(ca.empty());
  EXPECT_EQ(ca.rows(), 0u);
  ca.insert({"now", "two"}, ints({1}));  // an empty accessor takes any shape again
  EXPECT_EQ(ca.levels(), 2u);
}

TEST(column_accessor, mixed_column_types) {
  column_accessor ca({{"n", ints({1, 2})},
                      {"s", gpumem::strings_column_from_host(std::vector<std::string>{"a", "b"})}});
  EXPECT_EQ(ca.at("s").type().id(), gpumem::type_id::string);
}

}  // namespace
