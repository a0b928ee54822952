// gpumem/manager/out_of_memory_handlers.hpp
//
// Process-wide out-of-memory handlers per device: someone who can make room on a device (the
// spill manager moves buffers to host memory) registers here, and the memory managers ask every
// handler of the device before their one retry.
//
//   out_of_memory_registration r = add_out_of_memory_handler(0, [](std::size_t bytes) {
//     return free_some_memory(bytes);  // returns the bytes it released (an estimate is fine)
//   });
//   // ... until r is destroyed, an allocation on device 0 that runs out asks the handler once
//
// Where it is asked: every built-in manager (default, host_only, pool, async) and every
// resource_memory_manager runs one policy on out_of_memory: ask the device's handlers, flush the
// context's deferred frees, ask the manager's own hook, retry once. The handlers belong to the
// DEVICE, not to a context or a manager: a later set_memory_manager() + close() binds a new
// manager whose allocations ask the same handlers, so a registration is never lost silently. A
// plugin manager from a shared library that does not use resource_memory_manager does not ask.
//
// Bounded and non-reentrant: each failed allocation asks each handler at most once; an allocation
// made on a thread while that thread runs a handler (of any device) does not ask again, so a
// handler that allocates cannot recurse. A handler that throws is logged and counted as 0 bytes.
//
// Ownership: the registration owns the handler; destroying it (or reset()) unregisters. A call in
// flight on another thread may still finish after unregistration: a handler must keep what it
// uses alive itself (capture a shared or weak pointer). Thread safety: all functions may be called
// from any thread; handlers run on the allocating thread, possibly on several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpumem {

// Called with the bytes that could not be allocated; returns the bytes it released.
using out_of_memory_handler = std::function<std::size_t(std::size_t bytes)>;

class out_of_memory_registration {
 public:
  out_of_memory_registration() noexcept = default;
  out_of_memory_registration(out_of_memory_registration&& other) noexcept;
  out_of_memory_registration& operator=(out_of_memory_registration&& other) noexcept;
  out_of_memory_registration(out_of_memory_registration const&) = delete;
  out_of_memory_registration& operator=(out_of_memory_registration const&) = delete;
  ~out_of_memory_registration() { reset(); }

  // Unregisters (no-op when empty).
  void reset() noexcept;
  bool active() const noexcept { return id_ != 0; }

 private:
  friend out_of_memory_registration add_out_of_memory_handler(int, out_of_memory_handler);
  out_of_memory_registration(int device, std::uint64_t id) noexcept : device_(device), id_(id) {}
  int device_ = 0;
  std::uint64_t id_ = 0;
};

// Registers `handler` for allocations on `device` (logic_error when the handler is empty or the
// device negative).
out_of_memory_registration add_out_of_memory_handler(int device, out_of_memory_handler handler);

// The number of handlers registered for `device` now (tests).
std::size_t out_of_memory_handler_count(int device);

namespace detail {
// Asks every handler of `device` once, unless the calling thread is already inside a handler.
// Returns the bytes they reported. Never throws. (Called by the managers' retry policy.)
std::size_t run_out_of_memory_handlers(int device, std::size_t bytes) noexcept;
}  // namespace detail

}  // namespace gpumem
