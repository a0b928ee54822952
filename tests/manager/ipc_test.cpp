// IPC handles: serialisation, the errors, and a view exported here and opened in a second process
// (this executable, re-run through fork + exec with the handle in an environment variable).
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/ipc_handle.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern char** environ;

namespace gpumem {
namespace {

constexpr char const* handle_variable = "GPUMEM_TEST_IPC_HANDLE";
constexpr std::size_t allocation_bytes = 8192;
constexpr std::size_t view_offset = 1000;
constexpr std::size_t view_bytes = 300;

std::uint8_t pattern(std::size_t i) {
  return static_cast<std::uint8_t>((i * 31 + 7) & 0xff);
}

std::string to_hex(std::vector<std::uint8_t> const& bytes) {
  static char const digits[] = "0123456789abcdef";
  std::string hex;
  for (std::uint8_t b : bytes) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::vector<std::uint8_t> from_hex(std::string const& hex) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

// Runs this executable with only the child test selected and `handle_hex` in the environment;
// returns its exit status (0: the child's assertions passed).
int run_child(std::string const& handle_hex) {
  std::string const filter = "--gtest_filter=ipc_child.opens_the_exported_view";
  std::string const variable = std::string(handle_variable) + "=" + handle_hex;
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, handle_variable, std::strlen(handle_variable)) != 0)
      env_storage.emplace_back(*e);
  env_storage.push_back(variable);
  std::vector<char*> envp;
  for (auto& s : env_storage)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  std::vector<char*> argv{self, const_cast<char*>(filter.c_str()), nullptr};
  // Everything is prepared before fork: between fork and exec only async-signal-safe calls.
  pid_t const pid = ::fork();
  if (pid == 0) {
    ::execve(self, argv.data(), envp.data());
    ::_exit(127);
  }
  if (pid < 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ipc, a_view_opened_in_a_second_process_reads_the_right_bytes) {
  context& ctx = current_context();
  memory_pointer whole = ctx.memory_manager().memalloc(allocation_bytes);
  std::vector<std::uint8_t> host(allocation_bytes);
  for (std::size_t i = 0; i < host.size(); ++i)
    host[i] = pattern(i);
  backend().copy(whole.device_pointer(), host.data(), host.size());
  memory_pointer view = whole.view(view_offset, view_bytes);
  ipc_handle handle = ctx.memory_manager().get_ipc_handle(view);
  ASSERT_EQ(handle.offset(), view_offset);
  EXPECT_EQ(run_child(to_hex(handle.serialize())), 0) << "the child process failed; see its output";
}

// Runs only as the child of the test above.
TEST(ipc_child, opens_the_exported_view) {
  char const* hex = std::getenv(handle_variable);
  if (hex == nullptr) GTEST_SKIP() << "runs only in the child process of the ipc test";
  ipc_handle handle = ipc_handle::deserialize(from_hex(hex));
  EXPECT_NE(handle.source_process(), static_cast<std::int64_t>(::getpid()));
  context& ctx = current_context();
  memory_pointer opened = handle.open(ctx);
  ASSERT_EQ(opened.size(), view_bytes);
  EXPECT_TRUE(handle.is_open());
  std::vector<std::uint8_t> seen(view_bytes);
  backend().copy(seen.data(), opened.device_pointer(), seen.size());
  for (std::size_t i = 0; i < seen.size(); ++i)
    ASSERT_EQ(seen[i], pattern(view_offset + i)) << "byte " << i << " of the view";
  try {
    (void)handle.open(ctx);
    ADD_FAILURE() << "opening twice must fail";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("already open"), std::string::npos) << e.what();
  }
  handle.close();
  EXPECT_FALSE(handle.is_open());
  EXPECT_THROW(handle.close(), logic_error) << "closed twice (Numba's IpcHandle raises)";
  EXPECT_EQ(opened.use_count(), 1) << "the pointer keeps the mapping after close()";
  opened = memory_pointer();                // unmaps
  memory_pointer again = handle.open(ctx);  // a closed handle may be opened again
  EXPECT_EQ(again.size(), view_bytes);
  // A handle whose size reaches past the exported allocation (its bytes altered, or from another
  // source): refused, not a pointer that faults past the allocation's end.
  std::vector<std::uint8_t> bytes = handle.serialize();
  std::uint64_t const forged = 64u << 20;
  std::size_t const size_at = 8 + 4 + sizeof(ipc_memory_handle);  // tag, version, handle
  std::memcpy(bytes.data() + size_at, &forged, sizeof forged);
  ipc_handle too_large = ipc_handle::deserialize(bytes);
  ASSERT_EQ(too_large.size(), forged);
  try {
    (void)too_large.open(ctx);
    ADD_FAILURE() << "opened a handle that names more than its allocation";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("past the end of the exported allocation"),
              std::string::npos)
        << e.what();
  }
}

TEST(ipc, opening_in_the_exporting_process_is_an_error) {
  context& ctx = current_context();
  memory_pointer p = ctx.memory_manager().memalloc(256);
  ipc_handle handle = ctx.memory_manager().get_ipc_handle(p);
  try {
    (void)handle.open(ctx);
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("exported by this process"), std::string::npos)
        << e.what();
  }
  // Also after a round trip through bytes.
  ipc_handle copy = ipc_handle::deserialize(handle.serialize());
  EXPECT_THROW((void)copy.open(ctx), logic_error);
  // Never opened: nothing to close (Numba's IpcHandle.close() raises there too).
  EXPECT_THROW(copy.close(), logic_error);
}

TEST(ipc, a_pointer_that_holds_no_memory_is_a_logic_error) {
  // memalloc(0) owns no allocation: it was a cuda_error about a null address.
  context& ctx = current_context();
  memory_pointer p = ctx.memory_manager().memalloc(0);
  try {
    (void)ctx.memory_manager().get_ipc_handle(p);
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("holds no memory (0 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(ipc, serialisation_round_trips_every_field) {
  ipc_memory_handle raw{};
  for (std::size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<std::uint8_t>(i + 1);
  device_identity source;
  source.ordinal = 3;
  source.uuid[0] = 0xab;
  source.pci_domain = 1;
  source.pci_bus = 2;
  source.pci_device = 4;
  source.name = "device name";
  ipc_handle handle(memory_pointer(), raw, 12345, 678, source, 4242);
  ipc_handle back = ipc_handle::deserialize(handle.serialize());
  EXPECT_EQ(back.handle(), raw);
  EXPECT_EQ(back.size(), 12345u);
  EXPECT_EQ(back.offset(), 678u);
  EXPECT_EQ(back.source(), source);
  EXPECT_EQ(back.source().ordinal, 3);
  EXPECT_EQ(back.source().name, "device name");
  EXPECT_EQ(back.source_process(), 4242);
}

TEST(ipc, malformed_bytes_are_a_logic_error) {
  ipc_handle handle(memory_pointer(), ipc_memory_handle{}, 1, 0, device_identity{}, 1);
  std::vector<std::uint8_t> bytes = handle.serialize();
  std::vector<std::uint8_t> truncated(bytes.begin(), bytes.end() - 1);
  EXPECT_THROW((void)ipc_handle::deserialize(truncated), logic_error);
  std::vector<std::uint8_t> extended = bytes;
  extended.push_back(0);
  EXPECT_THROW((void)ipc_handle::deserialize(extended), logic_error);
  std::vector<std::uint8_t> wrong_tag = bytes;
  wrong_tag[0] ^= 0xff;
  EXPECT_THROW((void)ipc_handle::deserialize(wrong_tag), logic_error);
  EXPECT_THROW((void)ipc_handle::deserialize(std::vector<std::uint8_t>{}), logic_error);
}

// An offset and size that together pass SIZE_MAX name no range: refused when read, and when a
// handle made with them is opened (the mapping's size used to wrap to a small number).
TEST(ipc, an_offset_and_size_that_wrap_are_a_logic_error) {
  std::size_t const top = ~std::size_t{0};
  ipc_handle handle(memory_pointer(), ipc_memory_handle{}, top - 100, 4096, device_identity{}, 1);
  try {
    (void)ipc_handle::deserialize(handle.serialize());
    ADD_FAILURE() << "deserialised a handle whose range wraps";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("offset 4096"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)handle.open(get_context(0)), logic_error);
}

// A pointer may outlive its context (gpumem::close()); exporting it afterwards must not read the
// destroyed context (it used to take the device from owning_context(): a use after free, caught by
// the sanitizer build, and here made visible by refilling the freed memory with 0xff bytes, which
// read as device -1).
TEST(ipc, a_pointer_that_outlived_its_context_exports_with_its_own_device) {
  auto owner = std::make_unique<context>(
      0, [](context& c) { return std::make_unique<default_memory_manager>(c); });
  memory_pointer p = owner->memory_manager().memalloc(4096);
  memory_pointer view = p.view(256, 512);
  EXPECT_EQ(p.device(), 0);
  EXPECT_EQ(view.device(), 0);
  EXPECT_EQ(memory_pointer().device(), -1);
  owner.reset();
  std::vector<std::unique_ptr<unsigned char[]>> refill;
  for (int i = 0; i < 256; ++i) {
    refill.emplace_back(new unsigned char[sizeof(context)]);
    std::memset(refill.back().get(), 0xff, sizeof(context));
  }
  ipc_handle handle = current_context().memory_manager().get_ipc_handle(view);
  EXPECT_EQ(handle.offset(), 256u);
  EXPECT_EQ(handle.size(), 512u);
  EXPECT_EQ(handle.source().ordinal, 0);
  EXPECT_EQ(view.device(), 0);
}

}  // namespace
}  // namespace gpumem
