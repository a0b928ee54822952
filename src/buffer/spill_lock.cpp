// spill_lock (see spill_lock.hpp): a thread's stack of locks, and the storages each one pins.
#include "buffer_storage.hpp"
#include "spill_registry.hpp"

#include <gpumem/buffer/spill_lock.hpp>

#include <algorithm>

namespace gpumem {
namespace {
thread_local spill_lock* innermost = nullptr;
}  // namespace

spill_lock::spill_lock() : previous_(innermost) {
  innermost = this;
}

spill_lock::~spill_lock() {
  for (auto& storage : held_)
    storage->unpin();
  innermost = previous_;
  // What the scope brought back may go again: each spill manager involved is brought back under
  // its device limit (a limit of 0 spills the operation's inputs as soon as it is done).
  detail::spill_registry* last = nullptr;
  for (auto& storage : held_) {
    detail::spill_registry* const registry = storage->registry();
    if (registry == nullptr || registry == last) continue;
    last = registry;
    registry->enforce_limit();
  }
}

spill_lock* spill_lock::current() noexcept {
  return innermost;
}

bool spill_lock::holds(detail::buffer_storage const* storage) const noexcept {
  return std::any_of(held_.begin(), held_.end(),
                     [storage](auto const& s) { return s.get() == storage; });
}

void spill_lock::remember(std::shared_ptr<detail::buffer_storage> storage) {
  held_.push_back(std::move(storage));
}

void spill_lock::hold(buffer const& b) {
  // Pins without lending a pointer: no device work can use the bytes through this call, so a
  // later spill of them needs no device synchronisation on its account.
  b.hold_in(*this);
}

}  // namespace gpumem
