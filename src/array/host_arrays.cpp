// Allocation helpers of pinned, mapped and managed arrays (through the current context's memory
// manager; nothing for 0 bytes).
#include <gpumem/array/managed_array.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/manager/context.hpp>

namespace gpumem::detail {

host_memory allocate_host_memory(std::size_t bytes, host_alloc_flags flags) {
  if (bytes == 0) return {};
  return current_context().memory_manager().memhostalloc(bytes, flags);
}

memory_pointer allocate_managed_memory(std::size_t bytes, bool attach_global) {
  if (bytes == 0) return {};
  return current_context().memory_manager().memallocmanaged(bytes, attach_global);
}

}  // namespace gpumem::detail
