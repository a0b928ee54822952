// gpumem/core/detail/thread_identity.hpp
//
// Thread identities that are never reused. std::thread::id (a pthread_t) of a joined thread is
// handed to the next thread the process creates, so state keyed by it passes from a dead thread to
// an unrelated new one: a pool would give the new thread blocks the dead thread freed while its
// kernels still write them. Key per-thread state by this_thread_serial() instead, and retire it
// when the thread's lifetime token expires.
#pragma once

#include <cstdint>
#include <memory>

namespace gpumem::detail {

// The calling thread's serial: 1 for the first thread that asks, then 2, 3, ...; never 0, never
// given to two threads of the process. Valid until the thread's very end (thread_local destructors
// included): no allocation, no destructor.
std::uint64_t this_thread_serial() noexcept;

// Expires when the calling thread has exited, after all of its thread_local objects were destroyed:
// whoever keeps per-thread state for threads it does not control can hold a weak reference and drop
// that state once the reference has expired. Throws std::bad_alloc on the thread's first call only.
std::weak_ptr<void const> this_thread_lifetime();

}  // namespace gpumem::detail
