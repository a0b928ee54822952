// spill_lock (see spill_lock.hpp): a thread's stack of locks, and the storages each one pins.
//
// Each thread has one spill_lock_stack, made on its first lock and shared by the thread (a
// thread_local) and every lock it made. The innermost lock is read by its thread on every get_ptr
// without a lock (an atomic); pushes and pops take the stack's mutex, so that a lock destroyed on
// another thread, or out of order, unlinks itself from the chain safely, and a lock that outlives
// its thread still has a stack to leave.
#include "buffer_storage.hpp"
#include "spill_registry.hpp"

#include <gpumem/buffer/spill_lock.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

namespace gpumem {

namespace detail {

struct spill_lock_stack {
  std::mutex mutex;  // pushes, pops and unlinks; the chain of previous_ pointers
  std::atomic<spill_lock*> innermost{nullptr};

  void push(spill_lock& lock) {
    std::lock_guard<std::mutex> guard(mutex);
    lock.previous_ = innermost.load(std::memory_order_relaxed);
    innermost.store(&lock, std::memory_order_release);
  }

  void pop(spill_lock& lock) noexcept {
    std::lock_guard<std::mutex> guard(mutex);
    spill_lock* const top = innermost.load(std::memory_order_relaxed);
    if (top == &lock) {
      innermost.store(lock.previous_, std::memory_order_release);
      return;
    }
    // Destroyed out of order (or on another thread): unlink it from the middle of the chain.
    for (spill_lock* l = top; l != nullptr; l = l->previous_) {
      if (l->previous_ == &lock) {
        l->previous_ = lock.previous_;
        return;
      }
    }
  }
};

namespace {
std::shared_ptr<spill_lock_stack>& this_thread_stack() {
  thread_local std::shared_ptr<spill_lock_stack> stack;
  return stack;
}
}  // namespace

}  // namespace detail

spill_lock::spill_lock() {
  std::shared_ptr<detail::spill_lock_stack>& mine = detail::this_thread_stack();
  if (mine == nullptr) mine = std::make_shared<detail::spill_lock_stack>();
  stack_ = mine;
  stack_->push(*this);
}

spill_lock::~spill_lock() {
  for (auto& storage : held_)
    storage->unpin();
  stack_->pop(*this);
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
  std::shared_ptr<detail::spill_lock_stack> const& mine = detail::this_thread_stack();
  return mine == nullptr ? nullptr : mine->innermost.load(std::memory_order_acquire);
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
