// Internal to the cuda backend: the virtual-memory operations (vmm_registry.hpp) through the CUDA
// driver's VMM API, fetched at run time like every driver call (cuda_driver.hpp), so nothing links
// libcuda.
//
//   granularity  cuMemGetAllocationGranularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM) for pinned device
//                memory on the current device; 0 when the driver lacks the VMM entry points or the
//                device lacks CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED. Cached per
//                device.
//   reserve      cuMemAddressReserve, aligned to the granularity / cuMemAddressFree
//   create       cuMemCreate (CU_MEM_ALLOCATION_TYPE_PINNED on the current device) / cuMemRelease
//   map          cuMemMap, then cuMemSetAccess (read/write for the current device); a mapping
//                whose access cannot be set is unmapped again before the error is thrown
//   unmap        cuMemUnmap
//
// CUDA_ERROR_OUT_OF_MEMORY from cuMemCreate becomes gpumem::out_of_memory; every other failure is a
// gpumem::cuda_error naming the driver call (cuda_check.hpp). Every call works on the calling
// thread's current device and binds its primary context first.
//
// Thread safety: the driver calls may come from any thread; one mutex guards the granularity cache
// and the count of physical bytes (current and peak, for out-of-memory reports).
#pragma once

#include "vmm_registry.hpp"

#include <gpumem/core/config.hpp>

#include <memory>

#if GPUMEM_HAS_CUDA

namespace gpumem::detail {

std::unique_ptr<vmm_operations> make_cuda_vmm_operations();

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
