// Internal to the array layer: how a stream or event of the user's (stream.cpp, event.cpp) hands
// its handle back when its last copy goes. The destroy goes through the context's queue of
// resource releases (or runs at once where there is none), and is skipped, when the last copy
// goes as when the queue runs it, once the context has ended for a device reset
// (close_for_device_reset): the reset destroyed the handle with its context, and a stream or
// event of the next context may have it by then, as the frees of memory left to the reset make
// no device call either.
#pragma once

#include <gpumem/core/logging.hpp>
#include <gpumem/manager/pending_deallocations.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace gpumem::detail {

// Whether the context behind `device_reset` (null: none recorded) has ended for a device reset.
inline bool device_was_reset(std::shared_ptr<std::atomic<bool> const> const& device_reset) {
  return device_reset != nullptr && device_reset->load();
}

// `destroy` (a device call naming the handle) through `releases` (null: at once), unless the
// device was reset, now or by the time the queue runs it. A failure is logged as
// "`what`: destroy failed: ...", never thrown (this runs in destructors).
template <class Destroy>
void release_handle(std::shared_ptr<pending_deallocations> const& releases,
                    std::shared_ptr<std::atomic<bool> const> const& device_reset, Destroy destroy,
                    char const* what) noexcept {
  if (device_was_reset(device_reset)) return;
  try {
    auto unless_reset = [reset = device_reset, destroy = std::move(destroy)] {
      if (!device_was_reset(reset)) destroy();
    };
    if (releases)
      releases->enqueue(std::move(unless_reset), 0);
    else
      unless_reset();
  } catch (std::exception const& e) {
    log(log_level::error, std::string(what) + ": destroy failed: " + e.what());
  }
}

}  // namespace gpumem::detail
