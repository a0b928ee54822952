// Shared by the pool_resource test files: the fixture with two streams over a cuda_resource, and a
// stream gate closed at construction (work queued on the stream after it stays pending).
#pragma once

#include "../support/stream_gate.hpp"

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/cuda_resource.hpp>

#include <gtest/gtest.h>

namespace gpumem::test {

class closed_gate : public stream_gate {
 public:
  explicit closed_gate(stream_handle stream) { block(stream); }
};

struct pool_test : ::testing::Test {
  cuda_resource upstream;
  stream_handle a = backend().create_stream(true);
  stream_handle b = backend().create_stream(true);
  ~pool_test() override {
    backend().destroy_stream(a);
    backend().destroy_stream(b);
  }
};

}  // namespace gpumem::test
