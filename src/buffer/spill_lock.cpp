// spill_lock (see spill_lock.hpp): a thread's stack of locks, and the storages each one pins.
#include "buffer_storage.hpp"

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
  if (b.empty()) return;
  // get_ptr inside this (innermost) lock pins the storage; hold() may be called on an outer lock
  // too, so it pins through a scope of its own.
  spill_lock* const saved = innermost;
  innermost = this;
  try {
    (void)b.get_ptr(access::read);
  } catch (...) {
    innermost = saved;
    throw;
  }
  innermost = saved;
}

}  // namespace gpumem
