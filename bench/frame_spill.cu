// bench_frame_spill: a frame workload whose data is twice a device limit, run with spilling and
// without a limit, in one run:
//
//   frame     three numeric columns (int64, float64, int32 with nulls) and a strings column
//   workload  a string UDF over the strings column (frame::apply: upper case plus "!"), then
//             sum, min, max and mean of every numeric column
//   limited   a global spill_manager with device_limit = data / 2 (spill on demand on): the
//             frame's and the operations' buffers are spillable; each operation unspills its
//             inputs inside its spill lock, and the limit sends the least recently used back
//   unlimited the same frame and workload without a spill manager
//
// It prints both times, the limited run's spill statistics (bytes and copy time each way, batches,
// device synchronisations, pinning of host memory) and "results equal: yes/no" (the reductions'
// values and a hash of the UDF's offsets and characters). The frame is built on the host once per
// run, outside the timed region. Exit status 1 when the results differ. Device memory comes from
// the memory manager named by the second argument (default: the pool, as in bench_spill, so that
// an unspill costs no cudaMalloc and a spill no cudaFree).
//
//   bench_frame_spill [MiB] [manager]   (GPUMEM_DEVICE=cuda|host; default 8192 on cuda, 8 on host)
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/column/column.hpp>
#include <gpumem/column/strings_column.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/frame/apply.hpp>
#include <gpumem/frame/data_frame.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include "../tests/support/example_udfs.hpp"
#include "support/bench_support.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpumem::MiB;
using gpumem::bench::stopwatch;
namespace frame = gpumem::frame;

using gpumem::test::shout;  // s.upper() + "!", the UDF tests/frame/spill_ops_test.cu runs

// Bytes a row takes: 8 + 8 + 4 numeric, a mask bit, 8 offset bytes and 4 to 20 characters (12 on
// average).
constexpr std::size_t bytes_per_row = 8 + 8 + 4 + 8 + 12;

// The frame of about `bytes` bytes (deterministic contents).
frame::data_frame make_frame(std::size_t bytes) {
  std::size_t const rows = bytes / bytes_per_row;
  std::vector<std::int64_t> i64(rows);
  std::vector<double> f64(rows);
  std::vector<std::optional<std::int32_t>> i32(rows);
  std::vector<std::int64_t> offsets(rows + 1, 0);
  std::vector<char> chars;
  chars.reserve(rows * 12);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t r = 0; r < rows; ++r) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    i64[r] = static_cast<std::int64_t>(x % 2000001) - 1000000;
    f64[r] = static_cast<double>(x % 1000003) / 1024.0;
    if (r % 7 != 3) i32[r] = static_cast<std::int32_t>(x >> 40) - (1 << 23);
    std::size_t const n = 4 + (x >> 20) % 17;
    for (std::size_t k = 0; k < n; ++k)
      chars.push_back(static_cast<char>('a' + (x >> (k * 3 % 50)) % 26));
    offsets[r + 1] = static_cast<std::int64_t>(chars.size());
  }
  gpumem::buffer off = gpumem::buffer::from_host(offsets.data(), offsets.size() * 8);
  gpumem::buffer text = gpumem::buffer::from_host(chars.data(), chars.size());
  return frame::data_frame(
      {{"i64", gpumem::column::from_host(i64, frame::frame_buffer_options())},
       {"f64", gpumem::column::from_host(f64, frame::frame_buffer_options())},
       {"i32", gpumem::column::from_host(i32, frame::frame_buffer_options())},
       {"name", gpumem::make_strings_column(rows, std::move(off), gpumem::type_id::int64,
                                            std::move(text), {}, 0)}});
}

// FNV-1a over a buffer's bytes, copied to the host in pieces.
std::uint64_t hash_bytes(gpumem::buffer const& b, std::uint64_t h) {
  std::vector<unsigned char> piece(std::min<std::size_t>(b.size(), 64 * MiB));
  for (std::size_t done = 0; done < b.size(); done += piece.size()) {
    std::size_t const n = std::min(piece.size(), b.size() - done);
    b.slice(done, n).copy_to_host(piece.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      h = (h ^ piece[i]) * 0x100000001b3ull;
  }
  return h;
}

struct outcome {
  double seconds = 0;
  std::vector<std::string> reductions;  // "label op value" (values exact: %.17g for floats)
  std::uint64_t udf_hash = 0;
  std::size_t udf_rows = 0;
};

std::string exact(frame::scalar const& s) {
  if (s.type().id() == gpumem::type_id::float64 && s.value<double>()) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", *s.value<double>());
    return text;
  }
  return s.to_string();
}

outcome run_workload(std::size_t bytes) {
  frame::data_frame const df = make_frame(bytes);
  gpumem::backend().synchronize();
  outcome out;
  stopwatch w;
  frame::series const loud = frame::apply(df, "name", shout{});
  char const* names[] = {"sum", "min", "max", "mean"};
  std::vector<frame::labelled_scalar> results[] = {df.sum(), df.min(), df.max(), df.mean()};
  gpumem::backend().synchronize();
  out.seconds = w.seconds();
  for (int op = 0; op < 4; ++op)
    for (auto const& r : results[op])
      out.reductions.push_back(r.name.to_string() + " " + names[op] + " " + exact(r.value));
  gpumem::column const& c = loud.values();
  out.udf_rows = c.size();
  out.udf_hash = hash_bytes(c.data(), hash_bytes(c.child(0).data(), 0xcbf29ce484222325ull));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool const on_cuda = gpumem::backend().kind() == gpumem::backend_kind::cuda;
    std::size_t const bytes =
        (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (on_cuda ? 8192 : 8)) * MiB;
    std::size_t const limit = bytes / 2;
    char const* const manager_name = argc > 2 ? argv[2] : "pool";
    gpumem::set_memory_manager(gpumem::load_memory_manager(manager_name));
    std::printf("bench_frame_spill\ndevice: %s\nmemory manager: %s\n",
                gpumem::bench::device_line().c_str(), manager_name);
    std::printf("frame: %s of data (%zu rows: int64, float64, int32 with nulls, strings)\n",
                gpumem::format_bytes(bytes).c_str(), bytes / bytes_per_row);
    std::printf("workload: string UDF (upper + \"!\") and sum/min/max/mean of every column\n");

    gpumem::spill_options o;
    o.device_limit = limit;
    o.statistics_level = 1;
    o.host_pool_growth = std::max<std::size_t>(limit / 4, 64 * MiB);
    auto manager = std::make_shared<gpumem::spill_manager>(o);
    gpumem::set_global_spill_manager(manager);
    outcome const limited = run_workload(bytes);
    gpumem::spill_statistics const stats = manager->statistics();
    gpumem::set_global_spill_manager(nullptr);
    manager.reset();

    outcome const unlimited = run_workload(bytes);

    bool const equal = limited.reductions == unlimited.reductions &&
                       limited.udf_hash == unlimited.udf_hash &&
                       limited.udf_rows == unlimited.udf_rows;
    std::printf("\nwith a device limit of %s: %.3f s\n", gpumem::format_bytes(limit).c_str(),
                limited.seconds);
    std::printf("without a limit:%*s %.3f s (spilling costs %.2fx)\n",
                static_cast<int>(gpumem::format_bytes(limit).size()) + 8, "", unlimited.seconds,
                unlimited.seconds > 0 ? limited.seconds / unlimited.seconds : 0.0);
    std::printf("%s", gpumem::to_string(stats).c_str());
    for (std::string const& r : limited.reductions)
      std::printf("  %s\n", r.c_str());
    std::printf("results equal: %s\n", equal ? "yes" : "no");
    if (stats.spilled_bytes == 0) std::printf("note: nothing was spilled\n");
    gpumem::close();
    return equal ? 0 : 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_frame_spill: %s\n", e.what());
    return 1;
  }
}
