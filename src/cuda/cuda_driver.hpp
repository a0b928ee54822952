// Internal to the cuda backend: the driver API functions gpumem needs, fetched at run time through
// cudaGetDriverEntryPointByVersion so that nothing links libcuda (binaries start on machines
// without a driver). Thread safe: the entry points are looked up once.
#pragma once

#include <gpumem/core/config.hpp>

#if GPUMEM_HAS_CUDA

#include <gpumem/cuda/device_backend.hpp>

namespace gpumem::detail {

// cuMemGetAddressRange: the allocation (device or managed) that contains `ptr`, on the calling
// thread's current device. Throws cuda_error (with the driver's code and name) when none does.
address_range driver_address_range(void const* ptr);

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
