// gpumem/core/assert.hpp
//
// GPUMEM_ASSERT(condition, message): an internal invariant of gpumem, the middle one of three tiers
// of checks (docs/design/checks.md):
//
//   GPUMEM_EXPECTS (error.hpp)   preconditions on what callers pass; always on; throws
//                                gpumem::logic_error naming the bad value
//   GPUMEM_ASSERT (this header)  internal invariants, cheap; on in debug builds (NDEBUG not
//                                defined), with GPUMEM_ENABLE_ASSERTS defined, and in validating
//                                builds (GPUMEM_VALIDATE=1); prints file:line, the condition and
//                                the message to stderr and aborts
//   check_invariants()           full-structure validators; tests call them, and after every
//                                operation of the stress tests in validating builds
//
// A failed assert is a bug in gpumem, never something a caller can handle, hence abort rather than
// an exception. When asserts are off, `condition` is not evaluated (so it must have no side
// effects) and the macro costs nothing. `message` is a string literal. In device code (the device
// pass of nvcc) the macro is always off: device code never traps.
#pragma once

#include <gpumem/core/config.hpp>

#if defined(GPUMEM_ENABLE_ASSERTS) || !defined(NDEBUG) || \
    (defined(GPUMEM_VALIDATE) && GPUMEM_VALIDATE)
#define GPUMEM_ASSERTS_ON 1
#else
#define GPUMEM_ASSERTS_ON 0
#endif

namespace gpumem::detail {
[[noreturn]] void assertion_failed(char const* condition, char const* message, char const* file,
                                   int line) noexcept;
}  // namespace gpumem::detail

#if GPUMEM_ASSERTS_ON && !GPUMEM_DEVICE_PASS
#define GPUMEM_ASSERT(condition, message) \
  ((condition) ? static_cast<void>(0)     \
               : ::gpumem::detail::assertion_failed(#condition, (message), __FILE__, __LINE__))
#else
// Unevaluated: the names in `condition` still count as used, so release builds do not warn.
#define GPUMEM_ASSERT(condition, message) static_cast<void>(sizeof(!(condition)))
#endif
