// IPC through the primitive layer: a handle exported here is opened by a SECOND process (a fresh
// executable, since a CUDA process must not fork after it has initialised CUDA), which checks the
// bytes at an offset and writes a reply that this process then sees. Runs on both backends.
#include "backend_fixtures.hpp"
#include "ipc_wire.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#ifndef GPUMEM_TEST_IPC_CHILD
#error "GPUMEM_TEST_IPC_CHILD (the path of test_cuda_ipc_child) must be defined by the build"
#endif

extern char** environ;

using gpumem::backend;
using gpumem::KiB;
using gpumem::test::device_buffer;

namespace {

// Runs the child with `args` and returns its exit status (or -1 with a failure recorded).
int run_child(std::vector<std::string> args) {
  args.insert(args.begin(), GPUMEM_TEST_IPC_CHILD);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int const spawned = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << std::strerror(spawned);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      ADD_FAILURE() << "waitpid: " << std::strerror(errno);
      return -1;
    }
  }
  if (!WIFEXITED(status)) {
    ADD_FAILURE() << "the IPC child did not exit normally (status " << status << ")";
    return -1;
  }
  return WEXITSTATUS(status);
}

}  // namespace

TEST(cuda_ipc, a_second_process_reads_and_writes_an_exported_allocation) {
  auto& b = backend();
  // 2 MiB: a whole allocation granule of the driver, as the users of IPC (pools) export.
  std::size_t const bytes = 2 * gpumem::MiB;
  device_buffer buffer(bytes);
  std::vector<std::uint8_t> contents(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    contents[i] = gpumem::test::ipc_pattern(i);
  b.copy(buffer.get(), contents.data(), bytes);

  gpumem::ipc_memory_handle const handle = b.ipc_get_handle(buffer.get());
  std::size_t const read_offset = gpumem::MiB + 17, write_offset = 40000, count = 333;
  int const status = run_child({gpumem::test::to_hex(handle), std::to_string(read_offset),
                                std::to_string(write_offset), std::to_string(count)});
  ASSERT_EQ(status, 0) << "the child reported a failure (2 arguments, 3 bytes differ, 4 threw)";

  std::vector<std::uint8_t> after(bytes);
  b.copy(after.data(), buffer.get(), bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    bool const replied = i >= write_offset && i < write_offset + count;
    ASSERT_EQ(after[i], replied ? gpumem::test::ipc_reply : gpumem::test::ipc_pattern(i))
        << "byte " << i;
  }
}

TEST(cuda_ipc, opening_a_handle_in_the_exporting_process_is_an_error) {
  auto& b = backend();
  device_buffer buffer(4 * KiB);
  gpumem::ipc_memory_handle const handle = b.ipc_get_handle(buffer.get());
  EXPECT_THROW((void)b.ipc_open(handle), gpumem::cuda_error);
}

TEST(cuda_ipc, exporting_an_interior_pointer_is_an_error) {
  auto& b = backend();
  device_buffer buffer(4 * KiB);
  EXPECT_THROW((void)b.ipc_get_handle(buffer.as<std::uint8_t>() + 256), gpumem::cuda_error);
}

// As CUDA's cudaIpcGetMemHandle (checked on an H200): managed memory cannot be exported; the host
// backend used to export it as if it were device memory.
TEST(cuda_ipc, exporting_managed_memory_is_an_error) {
  auto& b = backend();
  void* const managed = b.allocate_managed(4 * KiB, true);
  try {
    (void)b.ipc_get_handle(managed);
    ADD_FAILURE() << "exported managed memory";
  } catch (gpumem::cuda_error const& e) {
    EXPECT_EQ(e.code(), 1) << e.what();  // cudaErrorInvalidValue
  }
  b.deallocate_managed(managed);
  // Device memory, at the address the managed memory had if it is given that, exports as usual.
  device_buffer d(4 * KiB);
  EXPECT_NO_THROW((void)b.ipc_get_handle(d.get()));
  // Any free forgets a managed allocation, also while others are live (the host backend counts
  // them so that frees take no lock while there are none): what the freed one's address is given
  // next exports, the one still live does not.
  void* const kept = b.allocate_managed(4 * KiB, true);
  void* const freed = b.allocate_managed(4 * KiB, true);
  b.deallocate(freed);
  device_buffer reused(4 * KiB);
  EXPECT_NO_THROW((void)b.ipc_get_handle(reused.get()));
  EXPECT_THROW((void)b.ipc_get_handle(kept), gpumem::cuda_error);
  b.deallocate_managed(kept);
}

TEST(cuda_ipc, a_garbled_handle_is_refused_by_the_child) {
  // All-zero bytes are no handle on either backend: the child must report a failed open (4).
  gpumem::ipc_memory_handle const garbage{};
  EXPECT_EQ(run_child({gpumem::test::to_hex(garbage), "0", "0", "1"}), 4);
}

namespace {

// The host backend's handle layout (src/cuda/host_ipc.cpp), and a copy of `real` carrying
// `payload` instead, as the child's command line takes it.
struct host_payload {
  std::uint8_t magic[8];
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t offset;
  std::uint64_t size;
};

std::string forged_handle(gpumem::ipc_memory_handle const& real, host_payload const& payload) {
  gpumem::ipc_memory_handle handle = real;
  std::memcpy(handle.data(), &payload, sizeof payload);
  return gpumem::test::to_hex(handle);
}

}  // namespace

// The host backend's handle names (pid, descriptor, offset, size) of the exporter's arena
// (src/cuda/host_ipc.cpp). Those fields are data from elsewhere: a handle whose range reaches past
// the arena, or whose descriptor is another file of the exporter, is refused by the opening
// process (exit 4), not mapped (a touch past the end of the file was SIGBUS; another file was
// mapped writable).
TEST(cuda_ipc, a_forged_host_handle_is_refused_by_the_child_not_mapped) {
  if (gpumem::test::on_cuda()) GTEST_SKIP() << "the host backend's handle layout";
  auto& b = backend();
  device_buffer buffer(4 * KiB);
  gpumem::ipc_memory_handle const real = b.ipc_get_handle(buffer.get());
  host_payload payload{};
  std::memcpy(&payload, real.data(), sizeof payload);
  auto forged = [&](host_payload const& p) { return forged_handle(real, p); };
  std::uint64_t const capacity = b.get_memory_info().total;

  host_payload past_the_end = payload;  // the last byte of the range lies past the arena
  past_the_end.offset = capacity + 64 * KiB;
  EXPECT_EQ(run_child({forged(past_the_end), std::to_string(payload.size - 1), "0", "1"}), 4);

  host_payload too_large = payload;
  too_large.size = capacity + 64 * KiB;
  EXPECT_EQ(run_child({forged(too_large), std::to_string(too_large.size - 1), "0", "1"}), 4);

  char name[] = "/tmp/gpumem_ipc_forged_XXXXXX";  // a regular file the exporter has open
  int const file = ::mkstemp(name);
  ASSERT_GE(file, 0) << std::strerror(errno);
  ::unlink(name);
  ASSERT_EQ(::ftruncate(file, 8 * KiB), 0);
  host_payload other_file = payload;
  other_file.fd = file;
  other_file.offset = 0;
  EXPECT_EQ(run_child({forged(other_file), "0", "0", "1"}), 4);
  ::close(file);
}

// The opening process checks what a handle's descriptor names before it opens it: opening is
// itself an effect on a FIFO or a device node (a reader or writer appears, a terminal becomes the
// controlling one, an open blocks), so a descriptor that is not the exporter's arena is refused
// unopened. Seen through inotify: the file the forged handle names gets no open event.
TEST(cuda_ipc, a_forged_host_handle_naming_a_fifo_or_file_is_not_opened) {
  if (gpumem::test::on_cuda()) GTEST_SKIP() << "the host backend's handle layout";
  auto& b = backend();
  device_buffer buffer(4 * KiB);
  gpumem::ipc_memory_handle const real = b.ipc_get_handle(buffer.get());
  auto forged_naming = [&](int fd) {
    host_payload p{};
    std::memcpy(&p, real.data(), sizeof p);
    p.fd = fd;
    p.offset = 0;
    return forged_handle(real, p);
  };
  // Whether the child opened the file of this process's descriptor `fd` (its exit status is 4).
  auto opened_by_the_child = [&](int fd) {
    int const watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    EXPECT_GE(watch, 0) << std::strerror(errno);
    std::string const self = "/proc/self/fd/" + std::to_string(fd);
    EXPECT_GE(::inotify_add_watch(watch, self.c_str(), IN_OPEN), 0) << std::strerror(errno);
    EXPECT_EQ(run_child({forged_naming(fd), "0", "0", "1"}), 4);
    alignas(inotify_event) char events[4096];
    bool const opened = ::read(watch, events, sizeof events) > 0;
    ::close(watch);
    return opened;
  };

  char dir[] = "/tmp/gpumem_ipc_fifo_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr) << std::strerror(errno);
  std::string const fifo_path = std::string(dir) + "/fifo";
  ASSERT_EQ(::mkfifo(fifo_path.c_str(), 0600), 0) << std::strerror(errno);
  int const fifo = ::open(fifo_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  ::unlink(fifo_path.c_str());
  ::rmdir(dir);
  ASSERT_GE(fifo, 0) << std::strerror(errno);
  EXPECT_FALSE(opened_by_the_child(fifo)) << "a FIFO the exporter has open";
  ::close(fifo);

  char name[] = "/tmp/gpumem_ipc_forged_XXXXXX";
  int const file = ::mkstemp(name);
  ASSERT_GE(file, 0) << std::strerror(errno);
  ::unlink(name);
  ASSERT_EQ(::ftruncate(file, 8 * KiB), 0);
  EXPECT_FALSE(opened_by_the_child(file)) << "a regular file the exporter has open";
  ::close(file);
}
