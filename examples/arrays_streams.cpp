// Streams and events: two streams ordered by an event, auto_synchronize, timing a copy.
#include <gpumem/array/event.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>

int main() {
  using namespace gpumem;
  std::printf("device: %s\n", backend().description().c_str());
  std::size_t const n = std::size_t{8} << 20;
  pinned_array<char> src({n}), dst({n});
  for (std::size_t i = 0; i < n; ++i)
    src(i) = static_cast<char>(i % 251);
  device_array<char> d({n});

  auto upload = stream::create(true);
  auto download = stream::create(true);
  event start = event::create(), uploaded = event::create();
  start.record(upload);
  copy(d, src, upload);
  uploaded.record(upload);
  download.wait(uploaded);  // the download starts only after the upload
  {
    auto sync = download.auto_synchronize();
    copy(dst, d, download);
  }  // download synchronised here
  float const ms = event_elapsed_time(start, uploaded);
  std::printf("upload of %zu MiB: %.3f ms (%.1f GB/s); round trip %s\n", n >> 20, ms,
              ms > 0 ? static_cast<double>(n) / (ms * 1e-3) / 1e9 : 0.0,
              dst(12345) == src(12345) ? "ok" : "WRONG");
  return dst(12345) == src(12345) ? 0 : 1;
}
