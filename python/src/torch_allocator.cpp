// The two functions PyTorch's CUDAPluggableAllocator calls (include/gpumem/python/
// torch_allocator.h): stream-ordered allocations of the device's gpumem manager.
//
// PyTorch passes the pointer, size, device and stream back at the free, so where the manager has
// an unowned path (memory_manager::unowned(): the pool and async managers) a tensor costs the
// manager's allocate_unowned and unowned()->deallocate and nothing else: no owner object, no
// table. The bridge only has to know WHICH manager a pointer came from, since the device's manager
// may be replaced while tensors live (gpumem.set_memory_manager). Per device it keeps a
// *generation* per manager it has served (the manager's unowned state, held so that the state
// outlives its manager, and a count of the blocks PyTorch holds), and:
//   * normally every live block belongs to the current generation: the free goes there;
//   * when the manager changes while the old generation still has live blocks, the device starts
//     *recording*: every later block is noted with its generation in a map (under the device's
//     mutex), and a block not in the map is one of the old generation's (the base). Recording is
//     the rare path and stays on for the device.
// Managers without an unowned path (default, plugins) go through a sharded table of
// memory_pointers, as before (while it holds any block of a device, every free on that device looks
// there first; the count is per device, so one device's table blocks slow no other device).
//
// CUDA graph capture is not supported: an allocation on a stream being captured is refused before
// the manager sees it (refuse_capture below), since the pool may call cudaMalloc or query events
// there, which break the capture, and a block it hands out is one that a replay of the graph would
// write into after the pool gave it to someone else.
#include <gpumem/python/torch_allocator.h>

#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "module.hpp"

namespace gpumem::python {
namespace {

// --- memory_pointer table: managers without an unowned path ---

// A block in the table, and the count of its device's table blocks (device_slot::table_blocks).
struct table_entry {
  memory_pointer memory;
  std::atomic<std::size_t>* count;
};

struct shard {
  std::mutex mutex;
  std::unordered_map<void*, table_entry> live;
};

// Table blocks of the ordinals past the slots (they have no fast path; counted for the record).
std::atomic<std::size_t>& other_table_count() {
  static std::atomic<std::size_t> count{0};
  return count;
}

std::array<shard, 16>& shards() {
  // Never destroyed: PyTorch may free tensors from its own static destructors after ours ran.
  static auto* const table = new std::array<shard, 16>();
  return *table;
}

shard& shard_of(void* ptr) {
  auto const bits = reinterpret_cast<std::uintptr_t>(ptr) >> 8;  // 256-byte aligned
  return shards()[(bits ^ (bits >> 4)) & 15];
}

// `count`: the device's count of table blocks, raised once the block is in the table (a free of
// the block, which comes after this returns, sees it).
void* table_allocate(memory_manager& manager, std::size_t size, void* stream,
                     std::atomic<std::size_t>& count) {
  memory_pointer memory = manager.allocate(size, reinterpret_cast<stream_handle>(stream));
  void* const ptr = memory.device_pointer();
  if (ptr == nullptr)  // PyTorch does not check: never hand it a null pointer for size > 0
    throw out_of_memory(size, "gpumem_torch_alloc", 0, 0, "the memory manager returned null");
  shard& s = shard_of(ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.live.emplace(ptr, table_entry{std::move(memory), &count});
  count.fetch_add(1, std::memory_order_release);
  return ptr;
}

// Frees `ptr` if the table has it (outside the lock); false if not.
bool table_free(void* ptr) {
  memory_pointer doomed;
  {
    shard& s = shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    if (it == s.live.end()) return false;
    doomed = std::move(it->second.memory);
    it->second.count->fetch_sub(1, std::memory_order_relaxed);
    s.live.erase(it);
  }
  return true;  // `doomed` frees here
}

// --- generations: managers with an unowned path ---

struct generation {
  std::shared_ptr<unowned_blocks> blocks;  // null: the table generation
  std::atomic<std::size_t> live{0};        // blocks of this generation PyTorch holds
};

constexpr int slot_devices = 64;

struct device_slot {
  std::mutex mutex;  // switches, the recorded map, the generations
  std::atomic<generation*> current{nullptr};
  std::atomic<bool> recording{false};
  // Blocks of this device in the table: while there are any, a free on the device first looks
  // there (a block of a table manager, such as "default", may be freed after the device switched
  // to a pool). PyTorch frees a block with the device it was allocated on, so other devices'
  // frees need not look.
  std::atomic<std::size_t> table_blocks{0};
  generation* base = nullptr;  // while recording: the owner of every block not in `recorded`
  std::unordered_map<void*, generation*> recorded;
  std::vector<std::unique_ptr<generation>> generations;
};

std::array<device_slot, slot_devices>& slots() {
  static auto* const table = new std::array<device_slot, slot_devices>();  // never destroyed
  return *table;
}

// Makes `blocks` (null: the table) the device's current generation; called when the manager
// changed (or on first use). Starts recording when the generation left behind still has blocks.
generation* switch_to(device_slot& slot, unowned_blocks* blocks) {
  std::lock_guard<std::mutex> lock(slot.mutex);
  generation* const old = slot.current.load(std::memory_order_relaxed);
  if (old != nullptr && old->blocks.get() == blocks) return old;  // another thread switched
  auto fresh = std::make_unique<generation>();
  if (blocks != nullptr) fresh->blocks = blocks->shared_from_this();
  generation* const next = fresh.get();
  slot.generations.push_back(std::move(fresh));
  if (old != nullptr && old->blocks != nullptr && old->live.load(std::memory_order_acquire) > 0 &&
      !slot.recording.load(std::memory_order_relaxed)) {
    slot.base = old;
    slot.recording.store(true, std::memory_order_release);  // before `current` changes
  }
  slot.current.store(next, std::memory_order_release);
  // Generations that own nothing any more let their manager's state go.
  auto& all = slot.generations;
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](std::unique_ptr<generation> const& g) {
                             return g.get() != next && g.get() != slot.base &&
                                    g->live.load(std::memory_order_acquire) == 0;
                           }),
            all.end());
  return next;
}

// Frees a block of a generation.
void release(generation& g, void* ptr, std::size_t size, void* stream) noexcept {
  g.blocks->deallocate(ptr, size, reinterpret_cast<stream_handle>(stream));
  g.live.fetch_sub(1, std::memory_order_release);
}

void log_unknown(std::size_t size, int device) {
  log(log_level::error, "gpumem_torch_free: " + std::to_string(size) + " bytes on device " +
                            std::to_string(device) + " were not allocated by gpumem; ignored");
}

// Every free the fast path cannot take: the table, then the recorded map, then the base.
void slow_free(device_slot& slot, void* ptr, std::size_t size, int device, void* stream) {
  if (table_free(ptr)) return;
  generation* owner = nullptr;
  {
    std::lock_guard<std::mutex> lock(slot.mutex);
    auto it = slot.recorded.find(ptr);
    if (it != slot.recorded.end()) {
      owner = it->second;
      slot.recorded.erase(it);
    } else if (slot.recording.load(std::memory_order_relaxed)) {
      owner = slot.base;
    } else {
      generation* const g = slot.current.load(std::memory_order_relaxed);
      if (g != nullptr && g->blocks != nullptr) owner = g;
    }
  }
  if (owner == nullptr || owner->live.load(std::memory_order_acquire) == 0) {
    log_unknown(size, device);
    return;
  }
  release(*owner, ptr, size, stream);
}

// The error of an allocation on a stream that is being captured into a CUDA graph. Thrown, as the
// other failures of gpumem_torch_alloc are: PyTorch turns the exception into a RuntimeError with
// this text (it does not check a null pointer, which would become a tensor without memory).
[[noreturn]] void refuse_capture(std::size_t size, int device, void* stream) {
  char handle[32];
  std::snprintf(handle, sizeof handle, "%p", stream);
  throw not_supported(
      "gpumem_torch_alloc: " + std::to_string(size) + " bytes on stream " + handle + " of device " +
      std::to_string(device) +
      ", which is being captured into a CUDA graph: CUDA graph capture is not supported with "
      "gpumem.torch (a replay of the graph would write into memory that gpumem's pool hands out "
      "again once the capture ends, and the pool's CUDA calls could invalidate the capture). "
      "Nothing was allocated; capture in a process that does not call gpumem.torch.use(), where "
      "PyTorch's own allocator keeps a private memory pool for each graph");
}

}  // namespace

std::size_t torch_table_blocks(int device) noexcept {
  if (device < 0 || device >= slot_devices)
    return other_table_count().load(std::memory_order_acquire);
  return slots()[device].table_blocks.load(std::memory_order_acquire);
}

}  // namespace gpumem::python

extern "C" void* gpumem_torch_alloc(std::size_t size, int device, void* stream) {
  using namespace gpumem;
  using namespace gpumem::python;
  if (size == 0) return nullptr;  // PyTorch never frees a null pointer
  // One question per allocation on a created (or the per-thread) stream: about 30 ns on an H100
  // host (cuStreamIsCapturing). The null and legacy handles name the legacy default stream, which
  // CUDA never captures (cudaStreamBeginCapture refuses it), so PyTorch's default stream asks
  // nothing.
  if (reinterpret_cast<std::uintptr_t>(stream) > 1 &&
      backend().stream_is_capturing(reinterpret_cast<stream_handle>(stream)))
    refuse_capture(size, device, stream);
  memory_manager& manager = get_context(device).memory_manager();
  if (device < 0 || device >= slot_devices)
    return table_allocate(manager, size, stream, other_table_count());
  device_slot& slot = slots()[device];
  unowned_blocks* const blocks = manager.unowned();
  generation* g = slot.current.load(std::memory_order_acquire);
  if (g == nullptr || g->blocks.get() != blocks) g = switch_to(slot, blocks);
  if (blocks == nullptr) return table_allocate(manager, size, stream, slot.table_blocks);
  // Counted before the call: a generation with a block on the way is never taken for one that owns
  // nothing (switch_to lets those go).
  g->live.fetch_add(1, std::memory_order_relaxed);
  void* ptr = nullptr;
  try {
    ptr = manager.allocate_unowned(size, reinterpret_cast<stream_handle>(stream));
  } catch (...) {
    g->live.fetch_sub(1, std::memory_order_relaxed);
    throw;
  }
  if (ptr == nullptr) {  // PyTorch does not check: never hand it a null pointer for size > 0
    g->live.fetch_sub(1, std::memory_order_relaxed);
    throw out_of_memory(size, "gpumem_torch_alloc", 0, 0, "the memory manager returned null");
  }
  if (slot.recording.load(std::memory_order_acquire)) {
    try {
      std::lock_guard<std::mutex> lock(slot.mutex);
      slot.recorded.emplace(ptr, g);
    } catch (...) {
      release(*g, ptr, size, stream);
      throw;
    }
  }
  return ptr;
}

extern "C" void gpumem_torch_free(void* ptr, std::size_t size, int device, void* stream) {
  using namespace gpumem::python;
  if (ptr == nullptr) return;
  if (device >= 0 && device < slot_devices) {
    device_slot& slot = slots()[device];
    generation* const g = slot.current.load(std::memory_order_acquire);
    if (g != nullptr && g->blocks != nullptr && !slot.recording.load(std::memory_order_acquire) &&
        slot.table_blocks.load(std::memory_order_acquire) == 0) {
      release(*g, ptr, size, stream);  // the block's own stream, which PyTorch passes again
      return;
    }
    if (g != nullptr) {
      slow_free(slot, ptr, size, device, stream);
      return;
    }
  }
  if (!table_free(ptr)) log_unknown(size, device);
}

extern "C" std::size_t gpumem_torch_live_allocations(void) {
  std::size_t n = 0;
  for (auto& s : gpumem::python::shards()) {
    std::lock_guard<std::mutex> lock(s.mutex);
    n += s.live.size();
  }
  for (auto& slot : gpumem::python::slots()) {
    std::lock_guard<std::mutex> lock(slot.mutex);
    for (auto const& g : slot.generations)
      if (g->blocks != nullptr) n += g->live.load(std::memory_order_relaxed);
  }
  return n;
}
