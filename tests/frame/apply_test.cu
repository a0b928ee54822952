// apply: a string UDF from the strings layer over a strings series / a frame's column, giving a
// new series with the same index and name (on the cuda backend a kernel of this file).
#include <example_udfs.hpp>
#include <expect_error.hpp>

#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/frame/apply.hpp>
#include <gpumem/frame/data_frame.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpumem::column;
using gpumem::frame::data_frame;
using gpumem::frame::label;
using gpumem::frame::series;
using gpumem::test::spec_udf;  // (s.upper() if len(s) > 2 else s + s) + "abc"
using rows_t = std::vector<std::optional<std::string>>;

TEST(apply, string_udf_over_series) {
  series const s(gpumem::strings_column_from_host(rows_t{"do", std::nullopt, "you", "é"}),
                 gpumem::frame::range_index(10, 14), "words");
  series const out = gpumem::frame::apply(s, spec_udf{});
  EXPECT_EQ(out.values().to_host_strings(), (rows_t{"dodoabc", std::nullopt, "YOUabc", "ééabc"}));
  EXPECT_EQ(out.name(), label("words"));
  EXPECT_EQ(out.index().range().start(), 10);
  EXPECT_FALSE(out.values().data().owns_same_memory(s.values().data()));
  // On a view: only its rows.
  series const tail = gpumem::frame::apply(s.slice(2, 4), spec_udf{});
  EXPECT_EQ(tail.values().to_host_strings(), (rows_t{"YOUabc", "ééabc"}));
  EXPECT_EQ(tail.index().range().start(), 12);
}

TEST(apply, frame_column_then_print) {
  data_frame df({{"n", column::from_host(std::vector<std::int32_t>{1, 2, 3})},
                 {"name", gpumem::strings_column_from_host(rows_t{"ab", "xyz", std::nullopt})}});
  df.set("loud", gpumem::frame::apply(df, "name", spec_udf{}).values());
  EXPECT_EQ(df.to_string(),
            "   n  name     loud\n"
            "0  1    ab  abababc\n"
            "1  2   xyz   XYZabc\n"
            "2  3  <NA>     <NA>");
  gpumem::test::expect_logic_error([&] { (void)gpumem::frame::apply(df, "n", spec_udf{}); },
                                   "is not a strings column");
}

}  // namespace
