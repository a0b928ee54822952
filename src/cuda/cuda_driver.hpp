// Internal to the cuda backend: the driver API functions gpumem needs, fetched at run time through
// cudaGetDriverEntryPointByVersion so that nothing links libcuda (binaries start on machines
// without a driver). Thread safe: the entry points are looked up once.
#pragma once

#include <gpumem/core/config.hpp>

#if GPUMEM_HAS_CUDA

#include <gpumem/cuda/device_backend.hpp>

#include <cstdint>

namespace gpumem::detail {

// cuMemGetAddressRange: the allocation (device or managed) that contains `ptr`, on the calling
// thread's current device. Throws cuda_error (with the driver's code and name) when none does.
address_range driver_address_range(void const* ptr);

// cuStreamGetId: the id CUDA gives `stream` (never reused within the process), for a created
// stream or the legacy/per-thread handles. About a quarter of cudaStreamGetId's cost (16 against
// 57 ns on an H100 host), and a pool asks it on every allocation and free on a created stream.
// Falls back to cudaStreamGetId where the driver lacks the entry point or refuses the call, so that
// errors carry the runtime's code and name. Throws cuda_error.
std::uint64_t driver_stream_id(void* stream);

// cuStreamIsCapturing: device_backend::stream_is_capturing. A created stream is asked through the
// driver (27-31 ns on an H100 host, against 68-99 ns for cudaStreamIsCapturing); the null, legacy
// and per-thread handles, and any stream where the driver lacks the entry point or refuses the
// call, through the runtime. cudaErrorStreamCaptureImplicit (the legacy stream while a blocking
// stream is captured) answers true. Throws cuda_error.
bool driver_stream_is_capturing(void* stream);

// The driver entry point `symbol` (in its CUDA 12.0 form), or nullptr when the driver lacks it.
// For driver calls made elsewhere in the backend (cuda_vmm.cpp); the caller casts it.
void* driver_entry_point(char const* symbol) noexcept;

// The name of a driver status (cuGetErrorName), or "CUDA_ERROR_UNKNOWN" when none is known.
char const* driver_error_name(int result) noexcept;

// The calling thread's current device, with its primary context made current on this thread, as
// driver calls need (CUDA 12+ initialises the context in cudaSetDevice). Throws cuda_error.
int bind_current_device();

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
