// The second process of the IPC test (ipc_test.cpp): opens the handle it is given on the command
// line, checks `count` bytes at `read_offset` against the parent's pattern, writes the reply byte
// over `count` bytes at `write_offset`, closes the handle. The backend comes from GPUMEM_DEVICE, as
// in the parent. Exit status: 0 on success, 2 for bad arguments, 3 when the bytes differ, 4 when a
// gpumem call threw.
//
//   test_cuda_ipc_child <handle hex> <read_offset> <write_offset> <count>
#include "ipc_wire.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <handle hex> <read_offset> <write_offset> <count>\n", argv[0]);
    return 2;
  }
  auto const handle = gpumem::test::from_hex(argv[1]);
  if (!handle) {
    std::fprintf(stderr, "ipc child: not a 64-byte handle in hex: %s\n", argv[1]);
    return 2;
  }
  std::size_t const read_offset = std::strtoull(argv[2], nullptr, 10);
  std::size_t const write_offset = std::strtoull(argv[3], nullptr, 10);
  std::size_t const count = std::strtoull(argv[4], nullptr, 10);
  try {
    auto& b = gpumem::backend();
    auto* base = static_cast<std::uint8_t*>(b.ipc_open(*handle));
    std::vector<std::uint8_t> seen(count);
    b.copy(seen.data(), base + read_offset, count);
    int status = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (seen[i] != gpumem::test::ipc_pattern(read_offset + i)) {
        std::fprintf(stderr, "ipc child: byte %zu is %u, expected %u\n", read_offset + i,
                     unsigned{seen[i]}, unsigned{gpumem::test::ipc_pattern(read_offset + i)});
        status = 3;
        break;
      }
    }
    std::vector<std::uint8_t> const reply(count, gpumem::test::ipc_reply);
    b.copy(base + write_offset, reply.data(), count);
    b.ipc_close(base);
    return status;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "ipc child: %s\n", e.what());
    return 4;
  }
}
