// gpumem/mr/memory_resource.hpp
//
// The stream-ordered resource interface every allocator in mr/ implements, and the one the memory
// managers (manager/) are built on.
//
// Contract (tested for every implementation by the typed contract suite in tests/mr/):
//   * allocate(bytes, stream) returns memory usable by work enqueued on `stream` after the call;
//     alignment is at least `default_alignment` (256 bytes, as cudaMalloc); 0 bytes returns
//     nullptr.
//   * deallocate(ptr, bytes, stream) is noexcept and takes the size that was allocated. Memory
//     freed on stream S may be reused at once by work on S; by another stream only after the work
//     on S up to the free has completed.
//   * allocate_sync / deallocate_sync: the same with the default stream of the resource's backend
//     (backend_in_use()) synchronised around the call, for callers with no stream (the EMM's
//     memalloc).
//   * Out of memory is reported as gpumem::out_of_memory; nothing else is thrown for it.
//   * A deallocate that the resource refuses (it logs and ignores a double free, a pointer it did
//     not hand out, a wrong size) is reported with report_refused_deallocation() on the calling
//     thread, before deallocate returns (below).
//   * Each implementation's class comment states its thread safety.
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstddef>
#include <string>

namespace gpumem {

inline constexpr std::size_t default_alignment = 256;

// Where memory of a resource may be touched: the run-time counterpart of CCCL's property tags
// (cuda::mr::device_accessible, host_accessible). Adaptors report their upstream's.
struct resource_properties {
  bool device_accessible = true;
  bool host_accessible = false;
  friend bool operator==(resource_properties a, resource_properties b) noexcept {
    return a.device_accessible == b.device_accessible && a.host_accessible == b.host_accessible;
  }
  friend bool operator!=(resource_properties a, resource_properties b) noexcept {
    return !(a == b);
  }
};

class memory_resource {
 public:
  memory_resource() = default;
  memory_resource(memory_resource const&) = delete;
  memory_resource& operator=(memory_resource const&) = delete;
  virtual ~memory_resource() = default;

  void* allocate(std::size_t bytes, stream_handle stream) { return do_allocate(bytes, stream); }
  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
    do_deallocate(ptr, bytes, stream);
  }
  void* allocate_sync(std::size_t bytes);
  void deallocate_sync(void* ptr, std::size_t bytes) noexcept;

  bool is_equal(memory_resource const& other) const noexcept { return do_is_equal(other); }
  friend bool operator==(memory_resource const& a, memory_resource const& b) noexcept {
    return a.is_equal(b);
  }
  friend bool operator!=(memory_resource const& a, memory_resource const& b) noexcept {
    return !a.is_equal(b);
  }

  // A short name for messages ("pool_resource over cuda_resource").
  virtual std::string name() const = 0;
  // Free and total bytes as this resource sees them; throws gpumem::not_supported where it cannot
  // say (the EMM's get_memory_info forwards this).
  virtual memory_info get_memory_info() const;
  // Device memory by default; host-visible resources (pinned, managed) and adaptors override.
  virtual resource_properties properties() const noexcept { return {}; }
  // True where a call may come with any device current: the resource belongs to one device and
  // makes it current itself where a call needs it (pool_resource). A caller that would otherwise
  // make the device current around every call (a memory manager: one cudaGetDevice per call)
  // may skip that. False by default: most resources allocate on the current device. Adaptors
  // forward their upstream's, so a stack over a pool is called as the pool is; an adaptor that
  // does device work of its own (tracking_adaptor's poisoning, failure_callback_adaptor's
  // callback) then does it on the upstream's own_device().
  virtual bool selects_own_device() const noexcept { return false; }
  // For a resource that selects_own_device(): the device it belongs to, or -1 where it does not
  // say (and always for the others). Adaptors forward their upstream's, so that one made over a
  // pool does its own device work on the pool's device whichever device was current when it was
  // made.
  virtual int own_device() const noexcept { return -1; }
  // The device backend whose memory and streams this resource works on, or null for the
  // process-wide gpumem::backend() (the default). Upstreams return the backend they were given,
  // pool_resource its pool_options::backend, adaptors their upstream's. What a resource does on
  // streams itself (allocate_sync's synchronisation, tracking_adaptor's poisoning) goes to this
  // backend: a stream of one backend means nothing to another. (Not named `backend`: a member of
  // that name would hide the free function gpumem::backend() in every derived class.)
  virtual device_backend* backend_in_use() const noexcept { return nullptr; }

 private:
  virtual void* do_allocate(std::size_t bytes, stream_handle stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept = 0;
  virtual bool do_is_equal(memory_resource const& other) const noexcept { return this == &other; }
};

// Refused frees. deallocate is noexcept and returns nothing, so an adaptor that counts bytes
// (statistics_adaptor, limit_adaptor, the memory managers' counters) cannot see that a resource
// below it ignored a free, and would count memory that is still live as freed: after a double
// free, a limit would let through more than it allows, and its count would later wrap. A resource
// that refuses a free calls report_refused_deallocation() on the calling thread; an adaptor opens
// a deallocation_watch before it passes the free down and, if refused() then says so, leaves its
// counts as they were. Watches nest (every adaptor of a stack sees the refusal of the resource at
// its bottom). Thread safe: the report is the calling thread's.
void report_refused_deallocation() noexcept;

class deallocation_watch {
 public:
  deallocation_watch() noexcept;  // clears the calling thread's report
  deallocation_watch(deallocation_watch const&) = delete;
  deallocation_watch& operator=(deallocation_watch const&) = delete;
  // True if a free was refused on this thread since construction (or since a nested watch began).
  bool refused() const noexcept;
};

}  // namespace gpumem
