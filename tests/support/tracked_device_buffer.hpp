// Device memory taken from the backend directly, with a flag that flips when it is released: for
// tests that foreign memory handed to gpumem with an owner lives exactly as long as it should.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <cstddef>
#include <memory>

namespace gpumem::test {

// Device memory from the backend with a flag that flips when released (lifetime tests).
struct tracked_device_buffer {
  explicit tracked_device_buffer(std::size_t bytes)
      : ptr(backend().allocate(bytes)), released(std::make_shared<std::atomic<bool>>(false)) {}
  // An owner for wrap_device_array: frees the memory and sets the flag.
  std::shared_ptr<void> owner() {
    auto flag = released;
    void* p = ptr;
    device_backend* b = &backend();
    return std::shared_ptr<void>(p, [flag, b](void* q) {
      b->deallocate(q);
      flag->store(true);
    });
  }
  void* ptr;
  std::shared_ptr<std::atomic<bool>> released;
};

}  // namespace gpumem::test
