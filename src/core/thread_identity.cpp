// Thread serials and lifetime tokens (core/detail/thread_identity.hpp).
#include <gpumem/core/config.hpp>
#include <gpumem/core/detail/thread_identity.hpp>

#include <pthread.h>

#include <atomic>
#include <cstdlib>

namespace gpumem::detail {

namespace {

std::atomic<std::uint64_t> next_serial{1};

// Trivial (no constructor or destructor): usable from other thread_local destructors.
GPUMEM_TLS_INITIAL_EXEC thread_local std::uint64_t serial = 0;

using token = std::shared_ptr<void const>;

// The token lives in a pthread key, not a C++ thread_local: glibc runs key destructors after every
// thread_local destructor, so a token outlives whatever those destructors still do with the
// thread's state (a pool settling the thread's per-thread stream, say).
pthread_key_t token_key() {
  static pthread_key_t const key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, [](void* p) { delete static_cast<token*>(p); }) != 0) std::abort();
    return k;
  }();
  return key;
}

}  // namespace

std::uint64_t this_thread_serial() noexcept {
  if (serial == 0) serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

std::weak_ptr<void const> this_thread_lifetime() {
  pthread_key_t const key = token_key();
  if (auto* held = static_cast<token*>(pthread_getspecific(key))) return *held;
  auto fresh = std::make_unique<token>(std::make_shared<char>(0));
  if (pthread_setspecific(key, fresh.get()) != 0) throw std::bad_alloc();
  return *fresh.release();
}

}  // namespace gpumem::detail
