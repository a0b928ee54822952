// Thread serials and lifetime tokens (core/detail/thread_identity.hpp).
#include <gpumem/core/config.hpp>
#include <gpumem/core/detail/thread_identity.hpp>

#include <atomic>

namespace gpumem::detail {

namespace {

std::atomic<std::uint64_t> next_serial{1};

// Trivial (no constructor or destructor): usable from other thread_local destructors.
GPUMEM_TLS_INITIAL_EXEC thread_local std::uint64_t serial = 0;

}  // namespace

std::uint64_t this_thread_serial() noexcept {
  if (serial == 0) serial = next_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

std::weak_ptr<void const> this_thread_lifetime() {
  thread_local std::shared_ptr<void const> const token = std::make_shared<char>(0);
  return token;
}

}  // namespace gpumem::detail
