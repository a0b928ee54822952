#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/ipc_mixin.hpp>

#include <gpumem/cuda/detail/scoped_device.hpp>

#include <unistd.h>

#include <string>

namespace gpumem {

ipc_handle make_ipc_handle(memory_pointer const& memory) {
  GPUMEM_EXPECTS(static_cast<bool>(memory), "get_ipc_handle: the memory_pointer is empty");
  // memalloc(0) gives a pointer that owns no memory: there is no allocation to export.
  GPUMEM_EXPECTS(
      memory.device_pointer() != nullptr && memory.size() > 0,
      "get_ipc_handle: the memory_pointer holds no memory (" + std::to_string(memory.size()) +
          " bytes at " +
          (memory.device_pointer() == nullptr ? std::string("null") : "a device address") +
          "): nothing to export");
  // The pointer's recorded device, not owning_context(): the pointer may have outlived its
  // context (gpumem::close()), whose object is then gone.
  int const device = memory.device();
  detail::scoped_device on_device(device);
  device_backend& b = backend();
  // IPC exports whole allocations: find the one containing the pointer and remember where in it
  // the pointer lies.
  address_range const range = b.get_address_range(memory.device_pointer());
  std::size_t const offset = static_cast<std::size_t>(
      static_cast<char const*>(memory.device_pointer()) - static_cast<char const*>(range.base));
  ipc_memory_handle const handle = b.ipc_get_handle(range.base);
  return ipc_handle(memory, handle, memory.size(), offset, b.identity(device),
                    static_cast<std::int64_t>(::getpid()));
}

}  // namespace gpumem
