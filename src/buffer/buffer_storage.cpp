// The tracked half of buffer_storage (see buffer_storage.hpp): acquiring a pointer (unspilling,
// pinning, exposing), finishing a spill, allocation of storages, and the host blocks' return to
// the pool. The spilling side (choosing victims, copying out) is in spill_registry.cpp.
#include "buffer_storage.hpp"

#include "spill_registry.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>

#include <chrono>
#include <utility>

namespace gpumem::detail {

host_block& host_block::operator=(host_block&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::move(other.registry_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void host_block::reset() noexcept {
  if (ptr_ != nullptr) registry_->release_host(ptr_, bytes_);
  ptr_ = nullptr;
  bytes_ = 0;
  registry_.reset();
}

buffer_storage::buffer_storage(void* base, std::size_t size, buffer_memory memory,
                               buffer_origin origin, keeper owner, tracking track) noexcept
    : base_(base),
      size_(size),
      memory_(memory),
      origin_(origin),
      owner_(std::move(owner)),
      tracked_(track.copy_on_write || track.spill != nullptr),
      copy_on_write_(track.copy_on_write),
      registry_(std::move(track.spill)) {}

buffer_storage::~buffer_storage() {
  if (registry_ != nullptr) registry_->remove(this, residence_.load(), size_);
}

void buffer_storage::touch() noexcept {
  if (registry_ != nullptr) last_use_.store(registry_->tick(), std::memory_order_relaxed);
}

bool buffer_storage::spillable_now() const noexcept {
  return registry_ != nullptr && origin_ == buffer_origin::allocated && pins_ == 0 &&
         residence_.load() == residence::on_device;
}

void buffer_storage::finish_spill(host_block host) noexcept {
  // The copy into `host` is complete: the device memory goes (through the manager's deferred
  // queue, which the out-of-memory path flushes before its retry).
  owner_ = std::shared_ptr<void>();
  host_ = std::move(host);
  base_ = host_.get();
  residence_.store(residence::spilled, std::memory_order_release);
}

void buffer_storage::unspill_locked() {
  auto const start = std::chrono::steady_clock::now();
  memory_pointer device = registry_->allocate_device(size_);
  void* const address = device.device_pointer();
  registry_->copy(address, host_.get(), size_, copy_direction::to_device);
  owner_ = std::move(device);
  base_ = address;
  host_.reset();
  residence_.store(residence::on_device, std::memory_order_release);
  std::chrono::duration<double> const took = std::chrono::steady_clock::now() - start;
  registry_->on_unspilled(size_, took.count());
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
    touch();
    if (use == pointer_use::pin || use == pointer_use::lend) {
      ++pins_;
      if (use == pointer_use::lend) lent_ = true;
    } else if (residence_.load() != residence::exposed) {
      residence_.store(residence::exposed, std::memory_order_release);
      if (registry_ != nullptr) registry_->on_exposed(size_, file, line);
    }
    address = base_;
  }
  // Outside the lock: the limit may spill other storages (this one is pinned or exposed).
  if (unspilled) registry_->enforce_limit();
  return address;
}

void buffer_storage::unpin() noexcept {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  --pins_;
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
  bool const tracked = track.copy_on_write;
  auto make = [&](void* base, buffer_storage::keeper owner) {
    if (!tracked)
      return std::make_shared<buffer_storage>(base, bytes, memory, buffer_origin::allocated,
                                              std::move(owner));
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
