// string_udf: a Python string UDF on a column of strings, on the GPU (or the host backend), with
// the memory picture afterwards. The UDF is the one of docs/strings.md and of cuDF's string-UDF
// design notes:
//
//   def udf(s):
//       result = s.upper() if len(s) > 2 else s + s
//       return result + "abc"
//
//   ./string_udf                       # examples/data/strings.txt
//   ./string_udf words.txt             # any UTF-8 text file: one row per line
//   GPUMEM_DEVICE=host ./string_udf    # no GPU needed
//
// Each row's result is a managed string (an NRT meminfo and a udf_string in one block of the
// device heap); strings::transform gathers them into a new strings column and drops every
// reference, so the NRT statistics printed at the end balance.
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/strings/case.hpp>
#include <gpumem/strings/combine.hpp>
#include <gpumem/strings/transform.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#ifndef GPUMEM_EXAMPLE_DATA_DIR
#define GPUMEM_EXAMPLE_DATA_DIR "examples/data"
#endif

namespace strings = gpumem::strings;

namespace {

// The UDF as the Python reads: upper() and `+` are the strings layer's (case.hpp, combine.hpp),
// found by argument-dependent lookup on the string_view. "abc" is appended in place, usually
// without a copy: upper() allocates once at the input's size rounded up to a power of two, so only
// a result within 3 bytes of that size (about one row in eight here) grows again.
struct spec_udf {
  GPUMEM_HD strings::udf_result operator()(strings::string_view s) const {
    strings::udf_string result = s.length() > 2 ? upper(s) : s + s;
    result += "abc";
    return result;  // becomes a managed string; failed (out of memory) if an allocation failed
  }
};

std::vector<std::string> read_lines(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

int run(int argc, char** argv) {
  std::string const path =
      argc > 1 ? argv[1] : std::string(GPUMEM_EXAMPLE_DATA_DIR) + "/strings.txt";
  std::printf("backend:   %s\n", gpumem::backend().description().c_str());
  std::vector<std::string> const lines = read_lines(path);
  gpumem::column const input = gpumem::strings_column_from_host(lines);
  std::printf("input:     %s: %zu rows, %s of characters\n", path.c_str(), input.size(),
              gpumem::format_bytes(input.data().size()).c_str());

  // The heap transform would make by itself, made here so that it can be inspected afterwards.
  std::size_t const heap_bytes = strings::heap_bytes_for(input);
  gpumem::nrt::memsys ms(gpumem::nrt::heap_options{heap_bytes}, gpumem::nrt::memsys_options{true});
  strings::transform_report report;
  strings::transform_options options;
  options.memsys = &ms;
  options.report = &report;

  (void)strings::transform(input, spec_udf{}, options);  // warm-up: code loaded, slabs touched
  ms.reset_statistics();
  auto const start = std::chrono::steady_clock::now();
  gpumem::column const output = strings::transform(input, spec_udf{}, options);
  double const seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::optional<std::string>> const out = output.to_host_strings();
  std::printf("\nfirst rows (udf(s) = (s.upper() if len(s) > 2 else s + s) + \"abc\"):\n");
  for (std::size_t i = 0; i < out.size() && i < 10; ++i) {
    std::string shown = "'" + lines[i] + "'";
    // Padded to 28 characters (code points, not bytes, so non-ASCII rows line up too).
    std::size_t chars = 0;
    for (unsigned char c : shown)
      chars += (c & 0xC0) != 0x80;
    if (chars < 28) shown.append(28 - chars, ' ');
    std::printf("  %s -> %s\n", shown.c_str(), out[i] ? ("'" + *out[i] + "'").c_str() : "null");
  }
  std::printf("\nrows:      %zu (%zu null), %s of output characters, %s offsets\n", report.rows,
              report.null_rows, gpumem::format_bytes(report.output_bytes).c_str(),
              report.int64_offsets ? "int64" : "int32");
  double const rate = static_cast<double>(report.rows) / seconds;
  std::printf("time:      %.3f ms (%.3g %srows/s)\n", seconds * 1e3,
              rate >= 1e6 ? rate / 1e6 : rate / 1e3, rate >= 1e6 ? "M " : "K ");
  std::printf("heap:      %s, peak %s held while the results lived (%zu managed strings)\n",
              ms.heap().name().c_str(), gpumem::format_bytes(report.heap_peak_bytes).c_str(),
              report.managed_rows);
  gpumem::nrt::memsys_statistics const s = ms.statistics();
  std::printf("NRT:       alloc %llu, free %llu, mi_alloc %llu, mi_free %llu -> %s\n",
              static_cast<unsigned long long>(s.alloc), static_cast<unsigned long long>(s.free),
              static_cast<unsigned long long>(s.mi_alloc),
              static_cast<unsigned long long>(s.mi_free),
              s.balanced() ? "balanced" : "NOT BALANCED (a leak)");
  gpumem::memory_manager& manager = gpumem::current_context().memory_manager();
  std::printf("manager:   %s", manager.name().c_str());
  if (auto* d = dynamic_cast<gpumem::default_memory_manager*>(&manager)) {
    auto const m = d->get_statistics();
    std::printf(": %zu allocations, %zu frees, %s in use, peak %s", m.allocations, m.frees,
                gpumem::format_bytes(m.bytes_in_use).c_str(),
                gpumem::format_bytes(m.peak_bytes).c_str());
  }
  std::printf("\n");
  return s.balanced() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "string_udf: %s\n", e.what());
    return 1;
  }
}
