// Driver entry points fetched through the runtime (see cuda_driver.hpp).
#include "cuda_driver.hpp"

#if GPUMEM_HAS_CUDA

#include "cuda_check.hpp"

#include <gpumem/core/error.hpp>

#include <cuda.h>  // driver types only: nothing links libcuda
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

namespace gpumem::detail {

namespace {

using cu_mem_get_address_range = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
using cu_get_error_name = CUresult (*)(CUresult, char const**);
using cu_stream_get_id = CUresult (*)(CUstream, unsigned long long*);
using cu_stream_is_capturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);

// cuMemGetAddressRange has had its current (size_t) form since CUDA 3.2; asking for 12.0 gets that
// form from any driver new enough for a CUDA 13 runtime.
constexpr unsigned driver_api_version = 12000;

struct entry_points {
  cu_mem_get_address_range mem_get_address_range = nullptr;
  cu_get_error_name get_error_name = nullptr;
  cu_stream_get_id stream_get_id = nullptr;
  cu_stream_is_capturing stream_is_capturing = nullptr;
};

void* lookup(char const* symbol, bool required) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cudaError_t const status =
      cudaGetDriverEntryPointByVersion(symbol, &fn, driver_api_version, cudaEnableDefault, &found);
  if (status == cudaSuccess && found == cudaDriverEntryPointSuccess && fn != nullptr) return fn;
  if (!required) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (status != cudaSuccess)
    throw_cuda_error(status, "cudaGetDriverEntryPointByVersion", __FILE__, __LINE__,
                     std::string("looking up ") + symbol);
  throw_cuda_error(cudaErrorSymbolNotFound, "cudaGetDriverEntryPointByVersion", __FILE__, __LINE__,
                   std::string("the driver does not provide ") + symbol + " (query result " +
                       std::to_string(static_cast<int>(found)) + ")");
}

entry_points const& driver() {
  static entry_points const entries = [] {
    entry_points e;
    e.mem_get_address_range =
        reinterpret_cast<cu_mem_get_address_range>(lookup("cuMemGetAddressRange", true));
    e.get_error_name = reinterpret_cast<cu_get_error_name>(lookup("cuGetErrorName", false));
    e.stream_get_id = reinterpret_cast<cu_stream_get_id>(lookup("cuStreamGetId", false));
    e.stream_is_capturing =
        reinterpret_cast<cu_stream_is_capturing>(lookup("cuStreamIsCapturing", false));
    return e;
  }();
  return entries;
}

std::string pointer_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

}  // namespace

int bind_current_device() {
  // A driver call needs a current context on this thread; selecting the device makes the runtime
  // bind the device's primary context here (CUDA 12+ initialises it in cudaSetDevice).
  int ordinal = 0;
  GPUMEM_CUDA_CHECK(cudaGetDevice(&ordinal), "cudaGetDevice");
  GPUMEM_CUDA_CHECK(cudaSetDevice(ordinal), "cudaSetDevice");
  return ordinal;
}

void* driver_entry_point(char const* symbol) noexcept {
  try {
    return lookup(symbol, false);
  } catch (...) {
    return nullptr;  // lookup(..., false) does not throw; this keeps the promise regardless
  }
}

char const* driver_error_name(int result) noexcept {
  char const* name = nullptr;
  try {
    entry_points const& d = driver();
    if (d.get_error_name != nullptr &&
        d.get_error_name(static_cast<CUresult>(result), &name) == CUDA_SUCCESS && name != nullptr)
      return name;
  } catch (...) {
    // no driver: fall through to the generic name
  }
  return "CUDA_ERROR_UNKNOWN";
}

std::uint64_t driver_stream_id(void* stream) {
  unsigned long long id = 0;
  // The null, legacy and per-thread handles name a stream of the current context: the driver needs
  // a current context on this thread, which the runtime binds lazily; the runtime call does that.
  bool const special =
      stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
  if (!special) {
    cu_stream_get_id get_id = nullptr;
    try {
      get_id = driver().stream_get_id;
    } catch (...) {
      // the driver lacks another entry point: the runtime call below
    }
    if (get_id != nullptr && get_id(static_cast<CUstream>(stream), &id) == CUDA_SUCCESS) return id;
  }
  GPUMEM_CUDA_CHECK(cudaStreamGetId(static_cast<cudaStream_t>(stream), &id), "cudaStreamGetId");
  return id;
}

bool driver_stream_is_capturing(void* stream) {
  // As driver_stream_id: the special handles need the context the runtime call binds.
  bool const special =
      stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
  if (!special) {
    cu_stream_is_capturing is_capturing = nullptr;
    try {
      is_capturing = driver().stream_is_capturing;
    } catch (...) {
      // the driver lacks another entry point: the runtime call below
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (is_capturing != nullptr &&
        is_capturing(static_cast<CUstream>(stream), &status) == CUDA_SUCCESS)
      return status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t const result = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
  if (result == cudaErrorStreamCaptureImplicit) {
    // The legacy stream while a blocking stream is captured: work there would join the capture.
    (void)cudaGetLastError();  // not sticky; clear it, as the answer is the result
    return true;
  }
  GPUMEM_CUDA_CHECK(result, "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

address_range driver_address_range(void const* ptr) {
  entry_points const& d = driver();
  bind_current_device();
  CUdeviceptr base = 0;
  std::size_t size = 0;
  CUresult const result = d.mem_get_address_range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr));
  if (result != CUDA_SUCCESS)
    throw cuda_error(static_cast<int>(result), driver_error_name(result), "cuMemGetAddressRange",
                     __FILE__, __LINE__, pointer_text(ptr) + " is not inside a device allocation");
  return {reinterpret_cast<void*>(base), size};
}

}  // namespace gpumem::detail

#endif  // GPUMEM_HAS_CUDA
