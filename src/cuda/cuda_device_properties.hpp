// Internal to the cuda backend: cudaGetDeviceProperties costs milliseconds, so each device's
// properties are read once per process and kept. Thread safe (each entry is filled under a
// once_flag); the table is sized by cudaGetDeviceCount on first use.
#pragma once

#include <gpumem/core/config.hpp>

#if GPUMEM_HAS_CUDA

#include <cuda_runtime_api.h>

#include <string>

namespace gpumem::detail {

// Throws cuda_error (cudaErrorInvalidDevice) when `ordinal` names no device.
cudaDeviceProp const& cuda_device_properties(int ordinal);

// "cuda device N (name)": how out_of_memory names the device that ran out.
std::string cuda_device_label(int ordinal);

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
