// gpumem/frame/apply.hpp
//
// apply: a string UDF over every row of a strings series (or of one column of a data frame),
// giving a new series with the same index — strings::transform (strings/transform.hpp) at the
// frame level.
//
//   struct shout {
//     GPUMEM_HD gpumem::strings::udf_result operator()(gpumem::strings::string_view s) const {
//       gpumem::strings::udf_string r = gpumem::strings::upper(s);
//       r += "!";
//       return r;
//     }
//   };
//   frame::series loud = frame::apply(df["name"], shout{});     // same index, name "name"
//
// Compile the calling file with nvcc in CUDA builds (a .cu file): the UDF's kernel is
// instantiated there, as for strings::transform. Nulls in give nulls out; the rules for memory,
// errors, streams and threads are transform's. The result owns new buffers; the input is only
// read.
#pragma once

#include <gpumem/frame/data_frame.hpp>
#include <gpumem/frame/series.hpp>
#include <gpumem/strings/transform.hpp>

namespace gpumem::frame {

template <class F>
series apply(series const& s, F udf, strings::transform_options const& options = {}) {
  return series(strings::transform(s.values(), udf, options), s.index(), s.name());
}

template <class F>
series apply(data_frame const& df, label const& key, F udf,
             strings::transform_options const& options = {}) {
  return apply(df[key], udf, options);
}

}  // namespace gpumem::frame
