// frame: a small table on the GPU (or the host backend) — build a frame from host data, run a
// string UDF over one column, reduce the numeric columns, take a view, and print, as pandas would.
//
//   ./frame                        # GPUMEM_DEVICE=host ./frame: no GPU needed
#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/frame/apply.hpp>
#include <gpumem/frame/data_frame.hpp>
#include <gpumem/strings/case.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace frame = gpumem::frame;
namespace strings = gpumem::strings;

namespace {

// Python: s.title() + "!" if len(s) > 3 else s
struct greet {
  GPUMEM_HD strings::udf_result operator()(strings::string_view s) const {
    if (s.length() <= 3) return s;  // a view of the input: nothing allocated
    strings::udf_string r = strings::title(s);
    r += "!";
    return r;
  }
};

int run() {
  std::printf("backend: %s\n\n", gpumem::backend().description().c_str());
  using opt_str = std::optional<std::string>;
  frame::data_frame df(
      {{"city", gpumem::strings_column_from_host({opt_str("paris"), opt_str("oslo"), std::nullopt,
                                                  opt_str("rome"), opt_str("nice")})},
       {"visits", gpumem::column::from_host(
                      std::vector<std::optional<std::int32_t>>{120, 45, 3, std::nullopt, 60})},
       {"rating", gpumem::column::from_host(std::vector<double>{4.5, 3.75, 2.0, 4.25, 5.0})}});

  // A string UDF per row of "city", as a new column of the same frame.
  df.set("shout", frame::apply(df, "city", greet{}).values());
  std::cout << df << "\n\n";

  for (auto const& [name, value] : df.sum())
    std::cout << "sum(" << name << ") = " << value << "\n";
  for (auto const& [name, value] : df.mean())
    std::cout << "mean(" << name << ") = " << value << "\n";
  std::cout << "max(visits) = " << df["visits"].max() << "\n\n";

  std::cout << df["visits"].cumsum() << "\n\n";

  // head() is a view; writing to it copies its column first, so df keeps its values.
  frame::data_frame top = df.head(2);
  top.set_rows<std::int32_t>("visits", 0, 2, 0);
  std::cout << top << "\n\n" << df.head(2) << "\n";
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "frame: %s\n", e.what());
    return 1;
  }
}
