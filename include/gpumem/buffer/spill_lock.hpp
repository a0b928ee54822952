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
// Work that uses the pointers must be finished (or ordered before any spill by a device-wide
// synchronisation, which every spill does first) before the lock goes. Locks nest; the outer one
// becomes innermost again when the inner one ends.
//
// Ownership: the lock keeps the storages it holds alive. Thread safety: a lock belongs to the
// thread that made it and must be destroyed there (in reverse order of creation); it is not to be
// shared. Errors: none (hold() may throw out_of_memory from unspilling).
#pragma once

#include <gpumem/buffer/buffer.hpp>

#include <memory>
#include <vector>

namespace gpumem {

class spill_lock {
 public:
  spill_lock();
  spill_lock(spill_lock const&) = delete;
  spill_lock& operator=(spill_lock const&) = delete;
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
  spill_lock* previous_;
  std::vector<std::shared_ptr<detail::buffer_storage>> held_;
};

}  // namespace gpumem
