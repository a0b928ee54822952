// Shared main of every gpumem test executable.
#include <gpumem/core/environment.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (gpumem::environment_snapshot().device == "cuda" && !gpumem::cuda_device_available()) {
    std::printf(
        "SKIPPED: GPUMEM_DEVICE=cuda but no usable CUDA device here (gpumem built %s CUDA)\n",
        GPUMEM_HAS_CUDA ? "with" : "without");
    return 77;  // CTest SKIP_RETURN_CODE
  }
  std::printf("gpumem test backend: %s\n", gpumem::backend().description().c_str());
  return RUN_ALL_TESTS();
}
