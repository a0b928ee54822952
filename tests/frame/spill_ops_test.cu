// Spilling through real operations: with a global spill manager whose device limit is 0, every
// buffer the column and frame layers make is spilled as soon as it is made; a reduction, a running
// sum, a write, a deep copy and a string UDF (strings::transform through frame::apply) bring their
// inputs back for the operation, and afterwards the inputs are spilled again — spillable, never
// exposed. (A kernel of this file: nvcc in CUDA builds.)
#include <example_udfs.hpp>

#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/apply.hpp>
#include <gpumem/frame/data_frame.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpumem::buffer;
using gpumem::column;
using gpumem::frame::data_frame;
using gpumem::frame::series;
using gpumem::test::shout;  // s.upper() + "!"
using rows_t = std::vector<std::optional<std::string>>;
template <class T>
using opt_vec = std::vector<std::optional<T>>;

// A global spill manager with a device limit of 0 for the test's scope.
class spill_everything : public ::testing::Test {
 protected:
  void SetUp() override {
    gpumem::spill_options o;
    o.spill_on_demand = false;
    o.device_limit = 0;
    o.statistics_level = 1;
    o.host_pool_growth = std::size_t{4} << 20;
    manager_ = std::make_shared<gpumem::spill_manager>(o);
    gpumem::set_global_spill_manager(manager_);
  }
  void TearDown() override { gpumem::set_global_spill_manager(nullptr); }

  gpumem::spill_manager& manager() { return *manager_; }

  // Every buffer of `c` (and its children) is spilled and not exposed.
  static void expect_spilled(column const& c, char const* what) {
    for (buffer const* b : {&c.data(), &c.null_mask()}) {
      if (b->empty()) continue;
      EXPECT_TRUE(b->is_spillable()) << what;
      EXPECT_TRUE(b->is_spilled()) << what;
      EXPECT_FALSE(b->is_exposed()) << what;
    }
    for (column const& child : c.children())
      expect_spilled(child, what);
  }

  std::shared_ptr<gpumem::spill_manager> manager_;
};

TEST_F(spill_everything, a_reduction_unspills_its_inputs_which_spill_again_afterwards) {
  series const s = series::from_host<std::int64_t>({{5}, std::nullopt, {7}, {-2}});
  expect_spilled(s.values(), "on creation");
  EXPECT_EQ(manager().device_bytes(), 0u);
  std::size_t const unspilled_before = manager().statistics().unspilled_bytes;

  EXPECT_EQ(s.sum().value<std::int64_t>(), 10);
  EXPECT_EQ(s.min().value<std::int64_t>(), -2);
  EXPECT_EQ(s.mean().value<double>(), 10.0 / 3);
  EXPECT_GT(manager().statistics().unspilled_bytes, unspilled_before);  // it came back
  expect_spilled(s.values(), "after the reductions");
  EXPECT_EQ(manager().device_bytes(), 0u);

  series const running = s.cumsum();
  EXPECT_EQ(running.to_host<std::int64_t>(), (opt_vec<std::int64_t>{5, std::nullopt, 12, 10}));
  expect_spilled(s.values(), "after cumsum");
  expect_spilled(running.values(), "cumsum's result");
}

TEST_F(spill_everything, a_string_udf_unspills_its_input_which_spills_again_afterwards) {
  series const names(gpumem::strings_column_from_host(rows_t{"ab", std::nullopt, "xyz"}));
  manager().spill_to_device_limit();  // whatever validation brought back
  expect_spilled(names.values(), "on creation");
  std::size_t const unspilled_before = manager().statistics().unspilled_bytes;

  series const loud = gpumem::frame::apply(names, shout{});
  EXPECT_EQ(loud.values().to_host_strings(), (rows_t{"AB!", std::nullopt, "XYZ!"}));
  EXPECT_GT(manager().statistics().unspilled_bytes, unspilled_before);
  expect_spilled(names.values(), "the UDF's input afterwards");
  expect_spilled(loud.values(), "the UDF's result");
}

TEST_F(spill_everything, writes_and_copies_of_a_frame_keep_everything_spillable) {
  data_frame df({{"a", column::from_host(std::vector<std::int32_t>{1, 2, 3})},
                 {"s", gpumem::strings_column_from_host(rows_t{"p", "q", "r"})}});
  manager().spill_to_device_limit();
  data_frame shallow = df.copy(false);
  shallow.set_rows<std::int32_t>("a", 0, 1, 9);
  EXPECT_EQ(shallow["a"].to_host<std::int32_t>(), (opt_vec<std::int32_t>{9, 2, 3}));
  EXPECT_EQ(df["a"].to_host<std::int32_t>(), (opt_vec<std::int32_t>{1, 2, 3}));
  data_frame const deep = shallow.copy(true);
  EXPECT_EQ(deep.sum()[0].value.value<std::int64_t>(), 14);
  manager().spill_to_device_limit();
  for (data_frame const* f : std::vector<data_frame const*>{&df, &shallow, &deep})
    for (std::size_t p = 0; p < f->num_columns(); ++p)
      expect_spilled(f->columns().at(p), "a frame's column");
}

}  // namespace
