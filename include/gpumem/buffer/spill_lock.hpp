// gpumem/buffer/spill_lock.hpp
//
// spill_lock: an RAII scope in which buffer pointers are gpumem's own — cuDF's acquire_spill_lock.
//
//   {
//     gpumem::spill_lock lock;                           // on this thread, until the scope ends
//     auto const* in = a.get_ptr(gpumem::access::read);      // unspilled, held on the device
//     auto* out = b.get_ptr(gpumem::access::write);          // unshared if copy-on-write
//     launch(..., in, out);
//     s.synchronize();                                       // before the lock goes
//   }                                                        // a and b may be spilled again
//
// While a spill_lock is the innermost one on a thread, get_ptr of a spillable or copy-on-write
// buffer on that thread HOLDS the buffer's storage (it is not spilled) instead of exposing it; the
// storage is released when the lock is destroyed. hold() does the same without taking a pointer.
// Work that uses the pointers must be finished (or at least enqueued: a spill of a buffer whose
// pointer was lent synchronises the device first) before the lock goes. Locks nest; the outer one
// becomes innermost again when the inner one ends.
//
// Ownership: the lock keeps the storages it holds alive. Thread safety: a lock belongs to the
// thread that made it (get_ptr and hold() on that thread use it); it is not movable and not to be
// used by two threads at once. It should be destroyed on its thread in reverse order of creation,
// but destroying it elsewhere is safe: on another thread (its own may have exited) or out of order,
// it releases what it holds and unlinks itself from its thread's stack of locks, leaving every
// thread's innermost lock as it should be. Errors: none (hold() may throw out_of_memory from
// unspilling).
#pragma once

#include <gpumem/buffer/buffer.hpp>

#include <memory>
#include <vector>

namespace gpumem {

namespace detail {
struct spill_lock_stack;
}  // namespace detail

class spill_lock {
 public:
  spill_lock();
  spill_lock(spill_lock const&) = delete;
  spill_lock& operator=(spill_lock const&) = delete;
  spill_lock(spill_lock&&) = delete;
  spill_lock& operator=(spill_lock&&) = delete;
  ~spill_lock();

  // Holds `b` on the device (unspilling it) for the rest of the scope.
  void hold(buffer const& b);
  // The number of storages held.
  std::size_t size() const noexcept { return held_.size(); }

  // The innermost lock of the calling thread, or null.
  static spill_lock* current() noexcept;

  // For buffer::get_ptr: whether `storage` is held, and holding one that get_ptr has pinned.
  bool holds(detail::buffer_storage const* storage) const noexcept;
  void remember(std::shared_ptr<detail::buffer_storage> storage);
  // Drops the last remembered storage without unpinning it (its pin failed).
  void forget_last() noexcept { held_.pop_back(); }

 private:
  friend struct detail::spill_lock_stack;
  // The thread's stack of locks: shared with the thread, so that a lock destroyed after its
  // thread exited (or on another thread) can still unlink itself.
  std::shared_ptr<detail::spill_lock_stack> stack_;
  spill_lock* previous_ = nullptr;  // under the stack's mutex
  std::vector<std::shared_ptr<detail::buffer_storage>> held_;
};

}  // namespace gpumem
