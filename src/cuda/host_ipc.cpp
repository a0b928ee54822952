// The host backend's IPC handles (see host_ipc.hpp).
#include "host_ipc.hpp"

#include "host_errors.hpp"

#include <gpumem/core/checked_arithmetic.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace gpumem::detail::host {

namespace {

constexpr std::array<std::uint8_t, 8> ipc_magic{'g', 'p', 'u', 'm', 'e', 'm', 'h', '1'};

struct ipc_payload {
  std::array<std::uint8_t, 8> magic;
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t offset;
  std::uint64_t size;
};
static_assert(sizeof(ipc_payload) <= sizeof(ipc_memory_handle));

}  // namespace

host_ipc::~host_ipc() {
  for (auto& entry : mappings_)
    ::munmap(entry.second.region, entry.second.length);
}

ipc_memory_handle host_ipc::export_range(host_arena const& arena, address_range range) {
  ipc_payload payload{ipc_magic, static_cast<std::int32_t>(::getpid()), arena.fd(),
                      arena.offset_of(range.base), range.size};
  ipc_memory_handle handle{};
  std::memcpy(handle.data(), &payload, sizeof payload);
  return handle;
}

void* host_ipc::open(ipc_memory_handle const& handle) {
  ipc_payload payload;
  std::memcpy(&payload, handle.data(), sizeof payload);
  if (payload.magic != ipc_magic)
    fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "ipc_open",
         "the handle was not exported by a host backend");
  if (payload.pid == ::getpid())
    fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "ipc_open",
         "the handle was exported by this process; open it in another process");
  std::size_t end = 0;
  if (!checked_add(payload.offset, payload.size, end))
    fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "ipc_open",
         "the handle names " + std::to_string(payload.size) + " bytes at offset " +
             std::to_string(payload.offset) + ", a range that wraps the address space");
  std::string const path =
      "/proc/" + std::to_string(payload.pid) + "/fd/" + std::to_string(payload.fd);
  // The handle's fields are data (from another process, a file, a socket): the descriptor must be
  // the exporter's arena, and the range must lie inside it. Else the mapping would be of some
  // other file of the exporter, or reach past the end of the arena, where a touch is SIGBUS. What
  // the descriptor names is checked before it is opened (readlink and stat open nothing): opening
  // a FIFO or a device node is an effect of its own (a reader or writer appears, a terminal
  // becomes the controlling one, an open blocks). The open then takes no terminal and does not
  // block, and what it opened must be the file checked: the exporter may have reused the
  // descriptor number meanwhile.
  auto const not_an_arena = [&] {
    fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "ipc_open",
         "the handle names descriptor " + std::to_string(payload.fd) + " of process " +
             std::to_string(payload.pid) + ", which is not a host backend's device memory");
  };
  std::string const arena_name = std::string("/memfd:") + host_arena::memfd_name;
  char target[256] = {};
  ssize_t const target_length = ::readlink(path.c_str(), target, sizeof target - 1);
  if (target_length < 0)
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "ipc_open",
         "cannot read " + path + ": " + strerror(errno) + " (has the exporting process exited?)");
  struct stat named {};
  if (std::string(target).compare(0, arena_name.size(), arena_name) != 0 ||
      ::stat(path.c_str(), &named) != 0 || !S_ISREG(named.st_mode))
    not_an_arena();
  int const fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "ipc_open",
         "cannot open " + path + ": " + strerror(errno) + " (has the exporting process exited?)");
  struct stat status {};
  if (::fstat(fd, &status) != 0 || status.st_dev != named.st_dev || status.st_ino != named.st_ino) {
    ::close(fd);
    not_an_arena();
  }
  if (end > static_cast<std::uint64_t>(status.st_size)) {
    ::close(fd);
    fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "ipc_open",
         "the handle names " + std::to_string(payload.size) + " bytes at offset " +
             std::to_string(payload.offset) + ", past the end of the exporting device (" +
             std::to_string(status.st_size) + " bytes)");
  }
  std::size_t const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t const start = payload.offset / page * page;
  std::size_t const length = end - start;
  void* region =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  ::close(fd);
  if (region == MAP_FAILED)
    fail(map_failed, "cudaErrorMapBufferObjectFailed", "ipc_open", strerror(errno));
  void* user = static_cast<std::uint8_t*>(region) + (payload.offset - start);
  std::lock_guard<std::mutex> lock(mutex_);
  mappings_[user] = {region, length, payload.size};
  return user;
}

void host_ipc::close(void* ptr) {
  mapping gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = mappings_.find(ptr);
    if (it == mappings_.end())
      fail(invalid_value, "cudaErrorInvalidValue", "ipc_close",
           pointer_text(ptr) + " was not opened through ipc_open");
    gone = it->second;
    mappings_.erase(it);
  }
  ::munmap(gone.region, gone.length);
}

std::optional<address_range> host_ipc::find(void const* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto const* p = static_cast<std::uint8_t const*>(ptr);
  for (auto const& [user, m] : mappings_) {
    auto const* base = static_cast<std::uint8_t const*>(user);
    if (p >= base && p < base + m.size) return address_range{user, m.size};
  }
  return std::nullopt;
}

}  // namespace gpumem::detail::host
