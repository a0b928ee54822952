#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/ipc_handle.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

namespace gpumem {

namespace {

// Serialised layout (native byte order: handles only travel between processes of one machine):
//   tag[8] "gpumemIH", u32 format version, handle[64], u64 size, u64 offset, i64 pid,
//   i32 ordinal, uuid[16], i32 pci domain, i32 pci bus, i32 pci device, u32 name length, name.
constexpr std::array<char, 8> format_tag{'g', 'p', 'u', 'm', 'e', 'm', 'I', 'H'};
constexpr std::uint32_t format_version = 1;

class writer {
 public:
  template <class T>
  void put(T const& value) {
    auto const* p = reinterpret_cast<std::uint8_t const*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(void const* data, std::size_t size) {
    auto const* p = static_cast<std::uint8_t const*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class reader {
 public:
  reader(std::uint8_t const* data, std::size_t size) : data_(data), size_(size) {}
  template <class T>
  T get(char const* field) {
    T value;
    get_bytes(&value, sizeof(T), field);
    return value;
  }
  void get_bytes(void* out, std::size_t size, char const* field) {
    GPUMEM_EXPECTS(size <= size_ - position_,
                   "ipc_handle::deserialize: the bytes end inside field '" + std::string(field) +
                       "' (" + std::to_string(size_) + " bytes given)");
    std::memcpy(out, data_ + position_, size);
    position_ += size;
  }
  std::size_t remaining() const noexcept { return size_ - position_; }

 private:
  std::uint8_t const* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

}  // namespace

ipc_handle::ipc_handle(memory_pointer base, ipc_memory_handle handle, std::size_t size,
                       std::size_t offset, device_identity source, std::int64_t source_process)
    : base_(std::move(base)),
      handle_(handle),
      size_(size),
      offset_(offset),
      source_(std::move(source)),
      source_process_(source_process) {}

std::vector<std::uint8_t> ipc_handle::serialize() const {
  writer w;
  w.put(format_tag);
  w.put(format_version);
  w.put(handle_);
  w.put(static_cast<std::uint64_t>(size_));
  w.put(static_cast<std::uint64_t>(offset_));
  w.put(static_cast<std::int64_t>(source_process_));
  w.put(static_cast<std::int32_t>(source_.ordinal));
  w.put(source_.uuid);
  w.put(static_cast<std::int32_t>(source_.pci_domain));
  w.put(static_cast<std::int32_t>(source_.pci_bus));
  w.put(static_cast<std::int32_t>(source_.pci_device));
  w.put(static_cast<std::uint32_t>(source_.name.size()));
  w.put_bytes(source_.name.data(), source_.name.size());
  return w.take();
}

ipc_handle ipc_handle::deserialize(std::uint8_t const* data, std::size_t bytes) {
  GPUMEM_EXPECTS(data != nullptr || bytes == 0, "ipc_handle::deserialize: null data");
  reader r(data, bytes);
  auto const tag = r.get<std::array<char, 8>>("format tag");
  GPUMEM_EXPECTS(tag == format_tag,
                 "ipc_handle::deserialize: the bytes do not start with the gpumem IPC tag");
  auto const version = r.get<std::uint32_t>("format version");
  GPUMEM_EXPECTS(version == format_version, "ipc_handle::deserialize: format version " +
                                                std::to_string(version) + ", expected " +
                                                std::to_string(format_version));
  ipc_handle h;
  h.handle_ = r.get<ipc_memory_handle>("handle");
  h.size_ = static_cast<std::size_t>(r.get<std::uint64_t>("size"));
  h.offset_ = static_cast<std::size_t>(r.get<std::uint64_t>("offset"));
  std::size_t end = 0;
  GPUMEM_EXPECTS(checked_add(h.offset_, h.size_, end), "ipc_handle::deserialize: offset " +
                                                           std::to_string(h.offset_) + " + size " +
                                                           std::to_string(h.size_) + " wraps");
  h.source_process_ = r.get<std::int64_t>("source process");
  h.source_.ordinal = r.get<std::int32_t>("device ordinal");
  h.source_.uuid = r.get<std::array<std::uint8_t, 16>>("device uuid");
  h.source_.pci_domain = r.get<std::int32_t>("pci domain");
  h.source_.pci_bus = r.get<std::int32_t>("pci bus");
  h.source_.pci_device = r.get<std::int32_t>("pci device");
  auto const name_size = r.get<std::uint32_t>("device name length");
  GPUMEM_EXPECTS(name_size == r.remaining(), "ipc_handle::deserialize: device name length " +
                                                 std::to_string(name_size) + " but " +
                                                 std::to_string(r.remaining()) + " bytes remain");
  h.source_.name.resize(name_size);
  if (name_size > 0) r.get_bytes(h.source_.name.data(), name_size, "device name");
  return h;
}

memory_pointer ipc_handle::open(context& ctx) {
  GPUMEM_EXPECTS(!opened_, "ipc_handle::open: this handle is already open; close() it first");
  GPUMEM_EXPECTS(source_process_ != static_cast<std::int64_t>(::getpid()),
                 "ipc_handle::open: the handle was exported by this process (pid " +
                     std::to_string(source_process_) +
                     "); use the memory directly or open it in another process");
  std::size_t mapped_bytes = 0;
  GPUMEM_EXPECTS(checked_add(offset_, size_, mapped_bytes),
                 "ipc_handle::open: offset " + std::to_string(offset_) + " + size " +
                     std::to_string(size_) + " wraps");
  int const device = ctx.device();
  detail::scoped_device on_device(device);
  void* const base = backend().ipc_open(handle_);
  // The bytes named must lie in the allocation opened (a handle's size and offset are data, from
  // another process or a file): else a touch past its end faults.
  std::size_t allocation = mapped_bytes;
  try {
    address_range const range = backend().get_address_range(base);
    allocation =
        range.size - std::min(range.size, static_cast<std::size_t>(static_cast<char*>(base) -
                                                                   static_cast<char*>(range.base)));
  } catch (cuda_error const&) {
    // the backend cannot tell: the handle's word is all there is
  }
  if (mapped_bytes > allocation) {
    backend().ipc_close(base);
    throw logic_error("ipc_handle::open: the handle names " + std::to_string(size_) +
                      " bytes at offset " + std::to_string(offset_) +
                      ", past the end of the exported allocation (" + std::to_string(allocation) +
                      " bytes)");
  }
  // The mapping covers the allocation from its base; the caller gets the exported range of it.
  // After a device reset the mapping went with the context: no close by address (the next
  // context may have mapped something else there).
  memory_pointer whole(ctx, base, mapped_bytes,
                       [base, device, reset = ctx.shared_device_reset_flag()] {
                         if (reset->load()) return;
                         detail::scoped_device d(device);
                         backend().ipc_close(base);
                       });
  opened_ = whole.view(offset_, size_);
  return opened_;
}

void ipc_handle::close() {
  GPUMEM_EXPECTS(is_open(),
                 "ipc_handle::close: the handle is not open (never opened, or closed already)");
  opened_ = memory_pointer();
}

}  // namespace gpumem
