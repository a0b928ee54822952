// The cuda backend: the primitive layer implemented with the CUDA runtime (see device_backend.hpp).
//
// Compiled by the host compiler against the static CUDA runtime. The one driver function gpumem
// needs (cuMemGetAddressRange) is fetched at run time through cudaGetDriverEntryPointByVersion, so
// nothing links libcuda and the binaries start on machines without a driver (where
// probe_cuda_device() answers false and the host backend is used instead).
//
// Every call works on the calling thread's current device, as the runtime does. Status codes become
// exceptions in cuda_check.cpp: cudaErrorMemoryAllocation from an allocation call becomes
// out_of_memory (there and nowhere else), everything else cuda_error.
//
// Virtual memory (reserve / create physical / map / unmap) goes through the driver's VMM API in
// cuda_vmm.cpp, behind the checks that both backends share (vmm_registry.hpp).
//
// Thread safety: as the CUDA runtime. The backend's own state is the bytes it has allocated
// (cuda_allocation_counter.hpp), the per-device default memory pools (looked up once) and the
// virtual-memory registry (its own mutex).
#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>

#if GPUMEM_HAS_CUDA

#include "copy_range.hpp"
#include "cuda_allocation_counter.hpp"
#include "cuda_check.hpp"
#include "cuda_device_properties.hpp"
#include "cuda_driver.hpp"
#include "cuda_vmm.hpp"
#include "vmm_registry.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace gpumem {

namespace detail {

bool probe_cuda_device() noexcept {
  static bool const usable = [] {
    int count = 0;
    cudaError_t const status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return usable;
}

void check_last_launch(char const* what) {
  cudaError_t const status = cudaGetLastError();
  if (status != cudaSuccess) throw_cuda_error(status, what, __FILE__, __LINE__);
}

void check_launch_status(int status, char const* what) {
  if (status != cudaSuccess)
    throw_cuda_error(static_cast<cudaError_t>(status), what, __FILE__, __LINE__);
}

}  // namespace detail

namespace {

cudaStream_t native(stream_handle stream) noexcept {
  return reinterpret_cast<cudaStream_t>(stream);
}
cudaEvent_t native(event_handle event) noexcept {
  return reinterpret_cast<cudaEvent_t>(event);
}

std::string pointer_text(void const* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

void check_event_handle(event_handle event, char const* call) {
  if (event == nullptr)
    detail::throw_cuda_error(cudaErrorInvalidResourceHandle, call, __FILE__, __LINE__,
                             "null event");
}

// cudaLaunchHostFunc takes a C function pointer and one void*: the std::function travels on the
// heap and the trampoline frees it after running it once. A host function must not throw across
// the driver, so errors are logged instead.
void run_host_function(void* user_data) noexcept {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(user_data));
  try {
    (*fn)();
  } catch (std::exception const& e) {
    log(log_level::error, std::string("a host function enqueued on a stream threw: ") + e.what());
  } catch (...) {
    log(log_level::error, "a host function enqueued on a stream threw");
  }
}

class cuda_backend final : public detail::vmm_backend {
 public:
  cuda_backend() {
    int count = 0;
    GPUMEM_CUDA_CHECK(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    pools_ = std::make_unique<pool_slot[]>(static_cast<std::size_t>(count));
    device_count_ = count;
  }

  backend_kind kind() const noexcept override { return backend_kind::cuda; }

  std::string description() override {
    cudaDeviceProp const& p = detail::cuda_device_properties(current_device());
    auto const gib = (p.totalGlobalMem + GiB / 2) / GiB;
    return std::string("cuda: ") + p.name + " (sm_" + std::to_string(p.major) +
           std::to_string(p.minor) + ", " + std::to_string(gib) + " GiB)";
  }

  // --- devices ---
  int device_count() override {
    int count = 0;
    GPUMEM_CUDA_CHECK(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    return count;
  }
  int current_device() override {
    int ordinal = 0;
    GPUMEM_CUDA_CHECK(cudaGetDevice(&ordinal), "cudaGetDevice");
    return ordinal;
  }
  void set_current_device(int ordinal) override {
    GPUMEM_CUDA_CHECK(cudaSetDevice(ordinal), "cudaSetDevice");
  }
  device_identity identity(int ordinal) override {
    cudaDeviceProp const& p = detail::cuda_device_properties(ordinal);
    device_identity id;
    id.ordinal = ordinal;
    static_assert(sizeof(p.uuid.bytes) == 16);
    std::memcpy(id.uuid.data(), p.uuid.bytes, 16);
    id.pci_domain = p.pciDomainID;
    id.pci_bus = p.pciBusID;
    id.pci_device = p.pciDeviceID;
    id.name = p.name;
    return id;
  }
  memory_info get_memory_info() override {
    memory_info info;
    GPUMEM_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total), "cudaMemGetInfo");
    return info;
  }
  void synchronize() override {
    GPUMEM_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  // --- device memory ---
  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    refuse_unservable(bytes, "cudaMalloc");
    void* p = nullptr;
    cudaError_t const status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) allocation_failed(status, bytes, "cudaMalloc");
    track(p, bytes);
    return p;
  }
  void deallocate(void* ptr) override {
    if (ptr == nullptr) return;
    release(ptr, "cudaFree", [ptr] { return cudaFree(ptr); });
  }
  void* allocate_async(std::size_t bytes, stream_handle stream) override {
    if (bytes == 0) return nullptr;
    refuse_unservable(bytes, "cudaMallocFromPoolAsync");
    void* p = nullptr;
    cudaError_t const status =
        cudaMallocFromPoolAsync(&p, bytes, default_pool(current_device()), native(stream));
    if (status != cudaSuccess) allocation_failed(status, bytes, "cudaMallocFromPoolAsync");
    track(p, bytes);
    return p;
  }
  void deallocate_async(void* ptr, stream_handle stream) override {
    if (ptr == nullptr) return;
    release(ptr, "cudaFreeAsync", [ptr, stream] { return cudaFreeAsync(ptr, native(stream)); });
  }
  std::size_t set_async_release_threshold(std::size_t bytes) override {
    cudaMemPool_t const pool = default_pool(current_device());
    std::uint64_t previous = 0;
    GPUMEM_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &previous),
                      "cudaMemPoolGetAttribute");
    std::uint64_t value = bytes;
    GPUMEM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value),
                      "cudaMemPoolSetAttribute");
    return static_cast<std::size_t>(previous);
  }
  void trim_async_pool(std::size_t keep_bytes) override {
    GPUMEM_CUDA_CHECK(cudaMemPoolTrimTo(default_pool(current_device()), keep_bytes),
                      "cudaMemPoolTrimTo");
  }

  // --- managed memory ---
  void* allocate_managed(std::size_t bytes, bool attach_global) override {
    if (bytes == 0) return nullptr;
    refuse_unservable(bytes, "cudaMallocManaged");
    void* p = nullptr;
    cudaError_t const status =
        cudaMallocManaged(&p, bytes, attach_global ? cudaMemAttachGlobal : cudaMemAttachHost);
    if (status != cudaSuccess) allocation_failed(status, bytes, "cudaMallocManaged");
    track(p, bytes);
    return p;
  }
  void deallocate_managed(void* ptr) override {
    if (ptr == nullptr) return;
    release(ptr, "cudaFree", [ptr] { return cudaFree(ptr); });
  }

  // --- pinned / mapped host memory ---
  void* allocate_pinned(std::size_t bytes, host_alloc_flags flags) override {
    unsigned native_flags = cudaHostAllocDefault;
    if (flags.mapped) native_flags |= cudaHostAllocMapped;
    if (flags.portable) native_flags |= cudaHostAllocPortable;
    if (flags.write_combined) native_flags |= cudaHostAllocWriteCombined;
    refuse_unservable(bytes, "cudaHostAlloc");
    void* p = nullptr;
    // A zero-byte request still yields a distinct pointer, as on the host backend.
    cudaError_t const status = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, native_flags);
    if (status != cudaSuccess) allocation_failed(status, bytes, "cudaHostAlloc");
    return p;
  }
  void deallocate_pinned(void* ptr) override {
    if (ptr == nullptr) return;
    GPUMEM_CUDA_CHECK(cudaFreeHost(ptr), "cudaFreeHost");
  }
  void register_host(void* ptr, std::size_t bytes, bool mapped, bool portable) override {
    unsigned flags = cudaHostRegisterDefault;
    if (mapped) flags |= cudaHostRegisterMapped;
    if (portable) flags |= cudaHostRegisterPortable;
    GPUMEM_CUDA_CHECK(cudaHostRegister(ptr, bytes, flags), "cudaHostRegister");
  }
  void unregister_host(void* ptr) override {
    GPUMEM_CUDA_CHECK(cudaHostUnregister(ptr), "cudaHostUnregister");
  }
  void* mapped_device_pointer(void* host_ptr) override {
    void* device_ptr = nullptr;
    GPUMEM_CUDA_CHECK(cudaHostGetDevicePointer(&device_ptr, host_ptr, 0),
                      "cudaHostGetDevicePointer");
    return device_ptr;
  }

  // --- copies and fills ---
  // cudaMemcpy returns before a device-to-device copy completes and cudaMemset before the fill
  // completes; the sync forms promise completion, so they wait on the legacy default stream (which
  // also orders them after work on blocking streams, as cudaMemcpy would be).
  void copy(void* dst, void const* src, std::size_t bytes) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "cudaMemcpyAsync", "destination");
    detail::check_copy_range(src, bytes, "cudaMemcpyAsync", "source");
    GPUMEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, nullptr),
                      "cudaMemcpyAsync");
    GPUMEM_CUDA_CHECK(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "cudaMemcpyAsync", "destination");
    detail::check_copy_range(src, bytes, "cudaMemcpyAsync", "source");
    GPUMEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, native(stream)),
                      "cudaMemcpyAsync");
  }
  void fill(void* dst, int value, std::size_t bytes) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "cudaMemsetAsync", "destination");
    GPUMEM_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, nullptr), "cudaMemsetAsync");
    GPUMEM_CUDA_CHECK(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "cudaMemsetAsync", "destination");
    GPUMEM_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, native(stream)), "cudaMemsetAsync");
  }

  // --- streams ---
  stream_handle create_stream(bool non_blocking) override {
    cudaStream_t s = nullptr;
    GPUMEM_CUDA_CHECK(
        cudaStreamCreateWithFlags(&s, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault),
        "cudaStreamCreateWithFlags");
    return reinterpret_cast<stream_handle>(s);
  }
  void destroy_stream(stream_handle stream) override {
    if (stream == nullptr) return;
    GPUMEM_CUDA_CHECK(cudaStreamDestroy(native(stream)), "cudaStreamDestroy");
  }
  void synchronize_stream(stream_handle stream) override {
    GPUMEM_CUDA_CHECK(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  }
  bool query_stream(stream_handle stream) override {
    return completed(cudaStreamQuery(native(stream)), "cudaStreamQuery");
  }
  stream_handle per_thread_default_stream() override {
    return reinterpret_cast<stream_handle>(cudaStreamPerThread);
  }
  std::uint64_t stream_id(stream_handle stream) override {
    return detail::driver_stream_id(native(stream));
  }
  bool stream_is_capturing(stream_handle stream) override {
    return detail::driver_stream_is_capturing(native(stream));
  }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    auto heap_fn = std::make_unique<std::function<void()>>(std::move(fn));
    GPUMEM_CUDA_CHECK(cudaLaunchHostFunc(native(stream), &run_host_function, heap_fn.get()),
                      "cudaLaunchHostFunc");
    heap_fn.release();  // owned by the trampoline from here on
  }

  // --- events ---
  event_handle create_event(bool timing) override {
    cudaEvent_t e = nullptr;
    GPUMEM_CUDA_CHECK(
        cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
    return reinterpret_cast<event_handle>(e);
  }
  void destroy_event(event_handle event) override {
    if (event == nullptr) return;
    GPUMEM_CUDA_CHECK(cudaEventDestroy(native(event)), "cudaEventDestroy");
  }
  void record_event(event_handle event, stream_handle stream) override {
    check_event_handle(event, "cudaEventRecord");
    GPUMEM_CUDA_CHECK(cudaEventRecord(native(event), native(stream)), "cudaEventRecord");
  }
  bool query_event(event_handle event) override {
    check_event_handle(event, "cudaEventQuery");
    return completed(cudaEventQuery(native(event)), "cudaEventQuery");
  }
  void synchronize_event(event_handle event) override {
    check_event_handle(event, "cudaEventSynchronize");
    GPUMEM_CUDA_CHECK(cudaEventSynchronize(native(event)), "cudaEventSynchronize");
  }
  void stream_wait_event(stream_handle stream, event_handle event) override {
    check_event_handle(event, "cudaStreamWaitEvent");
    GPUMEM_CUDA_CHECK(cudaStreamWaitEvent(native(stream), native(event), 0), "cudaStreamWaitEvent");
  }
  float elapsed_ms(event_handle start, event_handle stop) override {
    check_event_handle(start, "cudaEventElapsedTime");
    check_event_handle(stop, "cudaEventElapsedTime");
    float ms = 0.0f;
    GPUMEM_CUDA_CHECK(cudaEventElapsedTime(&ms, native(start), native(stop)),
                      "cudaEventElapsedTime");
    return ms;
  }

  // --- addresses and IPC ---
  address_range get_address_range(void const* ptr) override {
    return detail::driver_address_range(ptr);
  }
  ipc_memory_handle ipc_get_handle(void* allocation_base) override {
    address_range const range = get_address_range(allocation_base);
    if (range.base != allocation_base)
      detail::throw_cuda_error(cudaErrorInvalidValue, "cudaIpcGetMemHandle", __FILE__, __LINE__,
                               pointer_text(allocation_base) +
                                   " is not the base of an allocation (the base is " +
                                   pointer_text(range.base) + ")");
    cudaIpcMemHandle_t native_handle{};
    GPUMEM_CUDA_CHECK(cudaIpcGetMemHandle(&native_handle, allocation_base), "cudaIpcGetMemHandle");
    static_assert(sizeof(native_handle) == sizeof(ipc_memory_handle));
    ipc_memory_handle handle{};
    std::memcpy(handle.data(), &native_handle, sizeof native_handle);
    return handle;
  }
  void* ipc_open(ipc_memory_handle const& handle) override {
    cudaIpcMemHandle_t native_handle{};
    std::memcpy(&native_handle, handle.data(), sizeof native_handle);
    void* p = nullptr;
    GPUMEM_CUDA_CHECK(cudaIpcOpenMemHandle(&p, native_handle, cudaIpcMemLazyEnablePeerAccess),
                      "cudaIpcOpenMemHandle");
    return p;
  }
  void ipc_close(void* ptr) override {
    GPUMEM_CUDA_CHECK(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle");
  }

  // --- virtual memory: vmm_backend forwards to vmm_ (cuda_vmm.hpp) ---
  detail::vmm_registry& vmm() noexcept override { return vmm_; }

 private:
  struct pool_slot {
    std::once_flag once;
    cudaMemPool_t pool = nullptr;
  };

  cudaMemPool_t default_pool(int ordinal) {
    if (ordinal < 0 || ordinal >= device_count_)
      detail::throw_cuda_error(cudaErrorInvalidDevice, "cudaDeviceGetDefaultMemPool", __FILE__,
                               __LINE__, "device " + std::to_string(ordinal) + " does not exist");
    pool_slot& slot = pools_[static_cast<std::size_t>(ordinal)];
    std::call_once(slot.once, [&] {
      GPUMEM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&slot.pool, ordinal),
                        "cudaDeviceGetDefaultMemPool");
    });
    return slot.pool;
  }

  // cudaErrorNotReady is an answer, not a failure; the runtime still records it as the thread's
  // last error, so it is cleared before it can be mistaken for a failed launch.
  static bool completed(cudaError_t status, char const* call) {
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    detail::throw_cuda_error(status, call, __FILE__, __LINE__);
  }

  // CUDA rounds every request up to its allocation granularity; a size above max_allocation_bytes
  // (which no device holds) is refused before that rounding could wrap, as out of memory.
  void refuse_unservable(std::size_t bytes, char const* call) {
    if (bytes > max_allocation_bytes) allocation_failed(cudaErrorMemoryAllocation, bytes, call);
  }
  [[noreturn]] void allocation_failed(cudaError_t status, std::size_t bytes, char const* call) {
    detail::throw_allocation_failure(status, bytes, allocated_.peak_bytes(), call, __FILE__,
                                     __LINE__);
  }

  void track(void* p, std::size_t bytes) {
    try {
      allocated_.add(p, bytes);
    } catch (...) {
      // The allocation succeeded but cannot be accounted for: give it back rather than leak it.
      (void)cudaFree(p);
      throw;
    }
  }
  // Frees through `free_memory` (a call returning cudaError_t), forgetting the size first (see
  // allocation_counter::remove) and restoring it when the free fails.
  template <class Free>
  void release(void* p, char const* call, Free free_memory) {
    std::size_t const bytes = allocated_.remove(p);
    cudaError_t const status = free_memory();
    if (status == cudaSuccess) return;
    if (bytes != 0) {
      try {
        allocated_.add(p, bytes);
      } catch (...) {
        // the accounting is best effort once the table cannot grow; the error below matters more
      }
    }
    detail::throw_cuda_error(status, call, __FILE__, __LINE__);
  }

  int device_count_ = 0;
  std::unique_ptr<pool_slot[]> pools_;
  detail::allocation_counter allocated_;
  detail::vmm_registry vmm_{detail::make_cuda_vmm_operations()};
};

}  // namespace

std::unique_ptr<device_backend> make_cuda_backend() {
  if (!detail::probe_cuda_device())
    throw not_supported("the cuda backend needs a CUDA device, and none can be used here");
  return std::make_unique<cuda_backend>();
}

}  // namespace gpumem

#else  // !GPUMEM_HAS_CUDA: built without CUDA, gpumem reports that no CUDA device is available.

namespace gpumem {
namespace detail {
bool probe_cuda_device() noexcept {
  return false;
}

// launch() calls these in every translation unit nvcc compiles, also against this build, so they
// must exist here too (its own backend is the host's: launch() reaches them only under a backend
// installed in its place). The library holds no CUDA runtime: no launch of its own can fail.
void check_last_launch(char const*) {}

// `status` comes from the launching translation unit's runtime; without one here it stays
// unnamed (0 is cudaSuccess).
void check_launch_status(int status, char const* what) {
  if (status != 0)
    throw cuda_error(status, "cudaError_t", what, __FILE__, __LINE__,
                     "gpumem is built without CUDA and cannot name the code");
}
}  // namespace detail

std::unique_ptr<device_backend> make_cuda_backend() {
  throw not_supported("the cuda backend is not built (gpumem was configured without CUDA)");
}
}  // namespace gpumem

#endif  // GPUMEM_HAS_CUDA
