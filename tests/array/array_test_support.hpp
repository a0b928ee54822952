// Helpers shared by the array tests.
#pragma once

#include "stream_gate.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace gpumem::test {

template <class F>
void expect_logic_error(F&& f, std::string const& needle) {
  try {
    f();
    ADD_FAILURE() << "expected gpumem::logic_error containing \"" << needle << "\"";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

inline bool on_cuda_backend() {
  return backend().kind() == backend_kind::cuda;
}

using gate = stream_gate;

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
