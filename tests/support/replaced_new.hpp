// Test support: a global operator new that can be made to fail, for tests of what happens when
// the heap refuses. Include it in exactly ONE source file of a test executable (it defines the
// replaceable allocation functions for the whole executable), and define there
//   bool gpumem::test::refuse_allocation() noexcept;
// which decides each allocation (true: it throws std::bad_alloc; it must not allocate itself).
// Otherwise every allocation is malloc's.
//
// Sanitizer runtimes bring their own operator new (some link it statically): there nothing is
// replaced, GPUMEM_TEST_OWN_NEW is 0, and the tests that need a refusing heap skip.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GPUMEM_TEST_OWN_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GPUMEM_TEST_OWN_NEW 0
#endif
#endif
#ifndef GPUMEM_TEST_OWN_NEW
#define GPUMEM_TEST_OWN_NEW 1
#endif

namespace gpumem::test {
bool refuse_allocation() noexcept;
}  // namespace gpumem::test

#if GPUMEM_TEST_OWN_NEW
// GCC inlines the replacements below and then takes free() on memory from `new` for a mismatch.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t bytes) {
  if (gpumem::test::refuse_allocation()) throw std::bad_alloc();
  if (void* p = std::malloc(bytes != 0 ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) {
  return ::operator new(bytes);
}
void* operator new(std::size_t bytes, std::nothrow_t const&) noexcept {
  try {
    return ::operator new(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, std::nothrow_t const&) noexcept {
  return ::operator new(bytes, std::nothrow);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
#endif
