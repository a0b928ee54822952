#include "resource_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/mr/memory_resource.hpp>

namespace gpumem {

// The default stream synchronised is that of the resource's own backend: over a private backend
// (a test's small device, pool_options::backend), the process-wide one's says nothing about the
// work that used the memory.
void* memory_resource::allocate_sync(std::size_t bytes) {
  void* p = do_allocate(bytes, nullptr);
  try {
    detail::backend_of(*this).synchronize_stream(nullptr);
  } catch (...) {
    do_deallocate(p, bytes, nullptr);  // the caller never gets it: do not leak it
    throw;
  }
  return p;
}

void memory_resource::deallocate_sync(void* ptr, std::size_t bytes) noexcept {
  try {
    detail::backend_of(*this).synchronize_stream(nullptr);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("deallocate_sync: synchronize failed: ") + e.what());
  }
  do_deallocate(ptr, bytes, nullptr);
}

namespace {
GPUMEM_TLS_INITIAL_EXEC thread_local bool refused_deallocation = false;
}  // namespace

void report_refused_deallocation() noexcept {
  refused_deallocation = true;
}

deallocation_watch::deallocation_watch() noexcept {
  refused_deallocation = false;
}

bool deallocation_watch::refused() const noexcept {
  return refused_deallocation;
}

memory_info memory_resource::get_memory_info() const {
  throw not_supported(name() + " does not report memory info");
}

}  // namespace gpumem
