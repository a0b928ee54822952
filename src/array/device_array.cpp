// Allocation helpers of device_array (see device_array.hpp).
#include <gpumem/array/device_array.hpp>
#include <gpumem/manager/context.hpp>

namespace gpumem::detail {

memory_pointer allocate_device_memory(std::size_t bytes) {
  if (bytes == 0) return {};
  return current_context().memory_manager().memalloc(bytes);
}

memory_pointer foreign_device_memory(void* base, std::size_t bytes, std::shared_ptr<void> owner) {
  // The finalizer's only job is to hold `owner` until the last view is gone.
  return memory_pointer(current_context(), base, bytes, [owner = std::move(owner)] {});
}

}  // namespace gpumem::detail
