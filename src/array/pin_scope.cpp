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

std::shared_ptr<pending_deallocations> current_deallocation_queue() {
  return current_context().shared_pending_deallocations();
}

void release_pins(std::vector<host_memory>& pins,
                  std::shared_ptr<pending_deallocations> const& queue) noexcept {
  bool const had_pins = !pins.empty();
  for (auto const& pin : pins) {
    if (pin.use_count() > 1)
      log(log_level::warn,
          "pin scope ended while " + std::to_string(pin.use_count() - 1) +
              " other handle(s) still use the pinned memory; it stays pinned until they go");
  }
  pins.clear();
  if (!had_pins || !queue) return;
  try {
    queue->flush();
  } catch (std::exception const& e) {
    log(log_level::error,
        std::string("pin scope: flushing the deallocation queue failed: ") + e.what());
  }
}

}  // namespace gpumem::detail
