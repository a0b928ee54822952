// The tracked half of buffer_storage (see buffer_storage.hpp): acquiring a pointer (unspilling,
// pinning, exposing), finishing a spill, allocation of storages, and the host blocks' return to
// the pool. The spilling side (choosing victims, copying out) is in spill_registry.cpp.
#include "buffer_storage.hpp"

#include "spill_registry.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <utility>

namespace gpumem::detail {

buffer_storage::buffer_storage(void* base, std::size_t size, buffer_memory memory,
                               buffer_origin origin, keeper owner, tracking track) noexcept
    : base_(base),
      size_(size),
      memory_(memory),
      origin_(origin),
      owner_(std::move(owner)),
      opted_out_(track.opted_out),
      tracked_(track.copy_on_write || track.spill != nullptr),
      copy_on_write_(track.copy_on_write),
      registry_(std::move(track.spill)) {}

buffer_storage::~buffer_storage() {
  if (registry_ != nullptr) registry_->remove(*this, residence_.load(), size_);
}

bool buffer_storage::spillable_now() const noexcept {
  return registry_ != nullptr && origin_ == buffer_origin::allocated && pins_ == 0 &&
         residence_.load() == residence::on_device;
}

bool buffer_storage::finish_spill(host_copy host) noexcept {
  // The copy into `host` is complete and no work uses the device bytes (see spill_registry.cpp):
  // the memory goes back to the manager at once where it supports that, else through its
  // deferred queue (which the out-of-memory path flushes before its retry).
  bool freed = true;
  if (auto* device = std::get_if<memory_pointer>(&owner_)) freed = device->release_idle();
  owner_ = std::shared_ptr<void>();
  host_ = std::move(host);
  base_ = nullptr;
  residence_.store(residence::spilled, std::memory_order_release);
  return freed;
}

void buffer_storage::unspill_locked() {
  memory_pointer device = registry_->allocate_device(size_);
  void* const address = device.device_pointer();
  double const seconds = registry_->copy_to_device(address, host_);
  owner_ = std::move(device);
  base_ = address;
  host_.reset();
  residence_.store(residence::on_device, std::memory_order_release);
  registry_->on_unspilled(size_, seconds);
}

void* buffer_storage::acquire(pointer_use use, char const* file, int line) {
  bool unspilled = false;
  void* address = nullptr;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (residence_.load() == residence::spilled) {
      unspill_locked();
      unspilled = true;
    }
    if (use == pointer_use::pin || use == pointer_use::lend) {
      // Pinned: out of the LRU order until the last pin goes (unpin puts it at the back).
      if (++pins_ == 1 && registry_ != nullptr) registry_->leave_order(*this);
      if (use == pointer_use::lend) lent_ = true;
    } else if (residence_.load() != residence::exposed) {
      residence_.store(residence::exposed, std::memory_order_release);
      if (registry_ != nullptr) {
        registry_->leave_order(*this);
        registry_->on_exposed(size_, file, line);
      }
    }
    address = base_;
  }
  // Outside the lock: the limit may spill other storages (this one is pinned or exposed).
  if (unspilled) registry_->enforce_limit();
  return address;
}

void buffer_storage::unpin() noexcept {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  // The end of a use: the most recently used candidate (exposed storages never are one).
  if (--pins_ == 0 && registry_ != nullptr && residence_.load() == residence::on_device)
    registry_->on_unpinned(*this);
}

std::shared_ptr<buffer_storage> allocate_storage(std::size_t bytes, buffer_memory memory,
                                                 buffer_storage::tracking track) {
  if (track.spill != nullptr) {
    GPUMEM_EXPECTS(
        memory == buffer_memory::device,
        std::string("buffer: only device memory is spillable, not ") + to_string(memory));
    spill_registry& registry = *track.spill;
    memory_pointer p = registry.allocate_device(bytes);
    void* base = p.device_pointer();
    auto storage = std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                                    std::move(p), std::move(track));
    registry.add(storage);
    return storage;
  }
  gpumem::memory_manager& manager = current_context().memory_manager();
  // Tracked only for copy-on-write here; the record keeps `opted_out` either way.
  auto make = [&](void* base, buffer_storage::keeper owner) {
    return std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                            std::move(owner), track);
  };
  switch (memory) {
    case buffer_memory::pinned: {
      host_memory h = manager.memhostalloc(bytes, host_alloc_flags{});
      void* base = h.host_pointer();
      return make(base, std::move(h));
    }
    case buffer_memory::managed: {
      // Attached globally: usable from any stream, as device buffers are.
      managed_memory m = manager.memallocmanaged(bytes, true);
      void* base = m.host_pointer();
      return make(base, memory_pointer(std::move(m)));
    }
    case buffer_memory::device:
      break;
  }
  memory_pointer p = manager.memalloc(bytes);
  void* base = p.device_pointer();
  return make(base, std::move(p));
}

}  // namespace gpumem::detail
