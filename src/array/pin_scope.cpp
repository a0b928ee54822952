// Pinning scopes (see pin_scope.hpp).
#include <gpumem/array/pin_scope.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>

#include <string>

namespace gpumem::detail {

host_memory pin_host_range(void* ptr, std::size_t bytes, bool mapped) {
  if (bytes == 0) return {};
  // The caller's memory has no shared owner; the scope guarantees it outlives the pin.
  return current_context().memory_manager().mempin(nullptr, ptr, bytes, mapped);
}

void release_pins(std::vector<host_memory>& pins) noexcept {
  for (auto const& pin : pins) {
    if (pin.use_count() > 1)
      log(log_level::warn,
          "pin scope ended while " + std::to_string(pin.use_count() - 1) +
              " other handle(s) still use the pinned memory; it stays pinned until they go");
  }
  pins.clear();  // unpins now: mempin does not defer (memory_manager.hpp)
}

}  // namespace gpumem::detail
