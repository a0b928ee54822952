// Helpers shared by the array tests.
#pragma once

#include "expect_error.hpp"
#include "stream_gate.hpp"
#include "tracked_device_buffer.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace gpumem::test {

inline bool on_cuda_backend() {
  return backend().kind() == backend_kind::cuda;
}

using gate = stream_gate;

}  // namespace gpumem::test
