// gpumem/cuda/device_backend.hpp
//
// The primitive layer: the ONE interface through which gpumem performs every device operation
// (allocation, pinning, mapping, copies, streams, events, IPC, memory info, device identity).
// Nothing above include/gpumem/cuda/ includes a CUDA header.
//
// Two implementations, chosen at run time by GPUMEM_DEVICE (cuda|host; default cuda when a GPU is
// present):
//   * cuda — the CUDA runtime (and driver entry points fetched through the runtime, so that
//     binaries start on machines without a driver). CUDA's out-of-memory becomes
//     gpumem::out_of_memory here and nowhere else; every other failure becomes gpumem::cuda_error
//     with the code and the call.
//   * host — a simulated device in host memory: a fixed-capacity arena
//     (GPUMEM_HOST_DEVICE_CAPACITY) so out-of-memory paths are testable; streams are in-order work
//     queues served by their own thread, so asynchronous copies really are asynchronous and events
//     really complete in order; IPC works across processes on one Linux machine (the arena is a
//     shared memory file).
//
// Handles are opaque pointers; `stream_handle{}` (null) is the default stream.
//
// Thread safety: every operation may be called from any thread, as the CUDA runtime allows.
// Stream semantics: as CUDA's: work on one stream runs in order; `stream_wait_event` orders a
// stream after an event; device-wide `synchronize()` waits for every stream.
#pragma once

#include <gpumem/core/environment.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gpumem {

enum class backend_kind { cuda, host };

char const* to_string(backend_kind kind) noexcept;

struct stream_impl;
struct event_impl;
// Opaque stream handle; a null value is the default stream. For the cuda backend it is the
// cudaStream_t itself, so external streams can be wrapped with
// `stream_handle{reinterpret_cast...}`.
using stream_handle = stream_impl*;
using event_handle = event_impl*;

// Opaque handle of a physical memory chunk (see the virtual-memory section of device_backend).
// Handles are never reused within one backend, so a stale handle is detected, not aliased;
// `physical_handle::none` is never a live chunk.
enum class physical_handle : std::uint64_t { none = 0 };

struct memory_info {
  std::size_t free = 0;
  std::size_t total = 0;
};

// Flags of pinned host allocations (cudaHostAllocMapped / Portable / WriteCombined).
struct host_alloc_flags {
  bool mapped = false;
  bool portable = false;
  bool write_combined = false;
};

// The allocation that contains a pointer: its base and size.
struct address_range {
  void* base = nullptr;
  std::size_t size = 0;
};

// Identity of a device, comparable across processes (the spec's `source_info`).
struct device_identity {
  int ordinal = 0;
  std::array<std::uint8_t, 16> uuid{};
  int pci_domain = 0;
  int pci_bus = 0;
  int pci_device = 0;
  std::string name;
  friend bool operator==(device_identity const& a, device_identity const& b) noexcept {
    return a.uuid == b.uuid && a.pci_domain == b.pci_domain && a.pci_bus == b.pci_bus &&
           a.pci_device == b.pci_device;
  }
  friend bool operator!=(device_identity const& a, device_identity const& b) noexcept {
    return !(a == b);
  }
};

// The 64 bytes of an IPC memory handle (cudaIpcMemHandle_t has this size; the host backend fills
// it with its own encoding).
using ipc_memory_handle = std::array<std::uint8_t, 64>;

class device_backend {
 public:
  virtual ~device_backend() = default;

  virtual backend_kind kind() const noexcept = 0;
  // A human-readable name of the backend and device, e.g. "cuda: NVIDIA H100 80GB HBM3".
  virtual std::string description() = 0;

  // --- devices ---
  virtual int device_count() = 0;
  virtual int current_device() = 0;
  virtual void set_current_device(int ordinal) = 0;
  virtual device_identity identity(int ordinal) = 0;
  virtual memory_info get_memory_info() = 0;
  virtual void synchronize() = 0;

  // --- device memory (throws out_of_memory when the device has too little) ---
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void* allocate_async(std::size_t bytes, stream_handle stream) = 0;
  virtual void deallocate_async(void* ptr, stream_handle stream) = 0;
  // A stream-ordered pool with a release threshold (cudaMemPoolAttrReleaseThreshold); the async
  // calls above use it. Returns the previous threshold.
  virtual std::size_t set_async_release_threshold(std::size_t bytes) = 0;
  virtual void trim_async_pool(std::size_t keep_bytes) = 0;

  // --- managed memory ---
  virtual void* allocate_managed(std::size_t bytes, bool attach_global) = 0;
  virtual void deallocate_managed(void* ptr) = 0;

  // --- pinned / mapped host memory ---
  virtual void* allocate_pinned(std::size_t bytes, host_alloc_flags flags) = 0;
  virtual void deallocate_pinned(void* ptr) = 0;
  virtual void register_host(void* ptr, std::size_t bytes, bool mapped, bool portable) = 0;
  virtual void unregister_host(void* ptr) = 0;
  // The device address of mapped host memory (throws cuda_error when `host_ptr` is not mapped).
  virtual void* mapped_device_pointer(void* host_ptr) = 0;

  // --- copies and fills (sync forms wait for completion; async forms are stream-ordered) ---
  virtual void copy(void* dst, void const* src, std::size_t bytes) = 0;
  virtual void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) = 0;
  virtual void fill(void* dst, int value, std::size_t bytes) = 0;
  virtual void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) = 0;

  // --- streams ---
  virtual stream_handle create_stream(bool non_blocking) = 0;
  virtual void destroy_stream(stream_handle stream) = 0;
  virtual void synchronize_stream(stream_handle stream) = 0;
  virtual bool query_stream(stream_handle stream) = 0;  // true when all work has completed
  // The per-thread default stream (cudaStreamPerThread).
  virtual stream_handle per_thread_default_stream() = 0;
  // A number that names `stream` (a live one) for the life of the process and is never given to
  // another stream (cudaStreamGetId). Handles are addresses: a stream created after another was
  // destroyed may get the same one, its id never. The null stream has a fixed id; the per-thread
  // default stream's is the calling thread's own stream's.
  virtual std::uint64_t stream_id(stream_handle stream) = 0;
  // Runs `fn` on the host once all prior work on `stream` has completed, in stream order
  // (cudaLaunchHostFunc). `fn` must not call back into stream operations.
  virtual void enqueue_host_function(stream_handle stream, std::function<void()> fn) = 0;
  // Whether work put on `stream` now would go into a CUDA graph being captured instead of running
  // (cudaStreamIsCapturing): true while `stream` is being captured (an invalidated capture too,
  // until it is ended), and for the legacy default stream (the null or legacy handle) while a
  // blocking stream of its device is captured (cudaErrorStreamCaptureImplicit). The legacy stream
  // itself is never captured: CUDA refuses to begin a capture there. Asking changes no capture.
  // `stream` must be live (cuda_error where CUDA reports otherwise). The base class answers false,
  // for backends without graphs; so does the host backend, except for the streams a test marked
  // with simulate_stream_capture (below).
  virtual bool stream_is_capturing(stream_handle stream);

  // --- events ---
  virtual event_handle create_event(bool timing) = 0;
  virtual void destroy_event(event_handle event) = 0;
  virtual void record_event(event_handle event, stream_handle stream) = 0;
  virtual bool query_event(event_handle event) = 0;  // true when the recorded work has completed
  virtual void synchronize_event(event_handle event) = 0;
  virtual void stream_wait_event(stream_handle stream, event_handle event) = 0;
  virtual float elapsed_ms(event_handle start, event_handle stop) = 0;

  // --- addresses and IPC ---
  // The allocation containing `ptr` (device or managed memory). Throws cuda_error if none does.
  virtual address_range get_address_range(void const* ptr) = 0;
  virtual ipc_memory_handle ipc_get_handle(void* allocation_base) = 0;
  // Opens a handle exported by another process (opening one from this process is an error).
  virtual void* ipc_open(ipc_memory_handle const& handle) = 0;
  virtual void ipc_close(void* ptr) = 0;

  // --- virtual memory: reserve an address range, back parts of it with physical chunks ---
  // For growing a pool inside one contiguous range (as CUDA's VMM API and PyTorch's expandable
  // segments do). Every size, and every address passed to map_physical, must be a non-zero
  // multiple of vmm_granularity(). Bad input (a bad size, an address outside every reservation,
  // mapping over a mapping, unmapping what is not one mapping, releasing a range that still has
  // mappings or a chunk that is still mapped, an unknown handle) throws gpumem::logic_error naming
  // the value, on both backends. Unmapping or releasing memory that pending device work still
  // uses is the caller's error, as with deallocate. All calls may be made from any thread.
  //
  // The base class implements these for backends without virtual memory (wrappers, test
  // doubles): vmm_granularity() answers 0 and the other calls throw gpumem::not_supported, as the
  // cuda backend does on a device without CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.

  // The granularity of chunk sizes, reservation sizes and mapping addresses in bytes (a power of
  // two: 2 MiB on current GPUs and on the host backend); 0 when virtual memory is not supported.
  virtual std::size_t vmm_granularity();
  // Reserves `bytes` of address space, aligned to the granularity, with nothing mapped in it.
  virtual void* reserve_address_range(std::size_t bytes);
  // Gives back a whole reservation (`base` and `bytes` as reserve_address_range returned and got
  // them); every mapping in it must have been unmapped first.
  virtual void release_address_range(void* base, std::size_t bytes);
  // Device memory of `bytes` on the current device, not yet mapped anywhere. Throws
  // gpumem::out_of_memory when the device has too little.
  virtual physical_handle create_physical(std::size_t bytes);
  // Frees a chunk; it must not be mapped anywhere.
  virtual void release_physical(physical_handle chunk);
  // Maps the whole chunk (`bytes` is its size) at `address` inside a reservation, where nothing is
  // mapped yet, readable and writable by the current device. A chunk may be mapped more than once.
  virtual void map_physical(void* address, std::size_t bytes, physical_handle chunk);
  // Removes the mapping that map_physical made at `address` with `bytes` (exactly one mapping);
  // the range stays reserved and the chunk stays allocated.
  virtual void unmap(void* address, std::size_t bytes);
};

// The backend in use; created on first call from GPUMEM_DEVICE. Thread safe.
device_backend& backend();

// True when the cuda backend is compiled in and a CUDA device can be used on this machine.
bool cuda_device_available() noexcept;

// Options of the host backend (tests make small devices to exercise out-of-memory paths).
struct host_backend_options {
  std::size_t capacity = std::size_t{4} << 30;
  // Alignment of device allocations: a power of two of at least 256 bytes (CUDA gives at least
  // 256, and every resource promises it); another value throws gpumem::logic_error.
  std::size_t alignment = 256;
};

std::unique_ptr<device_backend> make_host_backend(host_backend_options options = {});
// Throws gpumem::not_supported when gpumem was built without CUDA or no device is present.
std::unique_ptr<device_backend> make_cuda_backend();

// The host backend records no graphs. For tests of code that must refuse to work while a stream is
// being captured, this makes `host`'s stream_is_capturing(stream) answer `capturing`: nothing else
// of the stream changes, and the handle is not checked (a made-up handle serves a test that never
// gives it work). A stream's mark goes when the stream is destroyed. Throws not_supported when
// `host` is not a host backend.
void simulate_stream_capture(device_backend& host, stream_handle stream, bool capturing);

// Replaces the process-wide backend and returns the previous one. For tests and embedders: call
// only while no context (gpumem::close()) and no allocation of the old backend is alive.
std::unique_ptr<device_backend> install_backend(std::unique_ptr<device_backend> backend);

}  // namespace gpumem
