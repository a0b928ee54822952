// The two functions PyTorch's CUDAPluggableAllocator calls (include/gpumem/python/
// torch_allocator.h): stream-ordered allocations of the device's gpumem manager, kept in a table
// by address until PyTorch frees them (PyTorch passes back the allocation's size, device and
// stream). Sharded so that threads freeing different tensors rarely share a lock.
#include <gpumem/python/torch_allocator.h>

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/context.hpp>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gpumem::python {
namespace {

struct shard {
  std::mutex mutex;
  std::unordered_map<void*, memory_pointer> live;
};

std::array<shard, 16>& shards() {
  // Never destroyed: PyTorch may free tensors from its own static destructors after ours ran.
  static auto* const table = new std::array<shard, 16>();
  return *table;
}

shard& shard_of(void* ptr) {
  auto const bits = reinterpret_cast<std::uintptr_t>(ptr) >> 8;  // 256-byte aligned
  return shards()[(bits ^ (bits >> 4)) & 15];
}

}  // namespace
}  // namespace gpumem::python

extern "C" void* gpumem_torch_alloc(std::size_t size, int device, void* stream) {
  using namespace gpumem;
  if (size == 0) return nullptr;  // PyTorch never frees a null pointer
  memory_pointer memory =
      get_context(device).memory_manager().allocate(size, reinterpret_cast<stream_handle>(stream));
  void* const ptr = memory.device_pointer();
  if (ptr == nullptr)  // PyTorch does not check: never hand it a null pointer for size > 0
    throw out_of_memory(size, "gpumem_torch_alloc", 0, 0, "the memory manager returned null");
  python::shard& s = python::shard_of(ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.live.emplace(ptr, std::move(memory));
  return ptr;
}

extern "C" void gpumem_torch_free(void* ptr, std::size_t size, int device, void* stream) {
  using namespace gpumem;
  (void)stream;  // the pointer frees on its allocation stream, which PyTorch passes again here
  if (ptr == nullptr) return;
  memory_pointer doomed;
  {
    python::shard& s = python::shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    if (it != s.live.end()) {
      doomed = std::move(it->second);
      s.live.erase(it);
    }
  }
  if (!doomed) {
    log(log_level::error, "gpumem_torch_free: " + std::to_string(size) + " bytes on device " +
                              std::to_string(device) + " were not allocated by gpumem; ignored");
  }
  // `doomed` frees here, outside the lock.
}

extern "C" std::size_t gpumem_torch_live_allocations(void) {
  std::size_t n = 0;
  for (auto& s : gpumem::python::shards()) {
    std::lock_guard<std::mutex> lock(s.mutex);
    n += s.live.size();
  }
  return n;
}
