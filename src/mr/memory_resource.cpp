#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/mr/memory_resource.hpp>

namespace gpumem {

void* memory_resource::allocate_sync(std::size_t bytes) {
  void* p = do_allocate(bytes, nullptr);
  backend().synchronize_stream(nullptr);
  return p;
}

void memory_resource::deallocate_sync(void* ptr, std::size_t bytes) noexcept {
  try {
    backend().synchronize_stream(nullptr);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("deallocate_sync: synchronize failed: ") + e.what());
  }
  do_deallocate(ptr, bytes, nullptr);
}

memory_info memory_resource::get_memory_info() const {
  throw not_supported(name() + " does not report memory info");
}

}  // namespace gpumem
