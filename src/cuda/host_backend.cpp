// The host backend: a simulated device in host memory (see device_backend.hpp).
//
// Device and managed memory come from one host_arena (host_arena.hpp), which also makes IPC across
// processes possible; which of its allocations are managed is host_managed.hpp's; pinned and
// registered host memory are tables of host ranges (host_page_locked.hpp); streams and events are
// host_stream.hpp's work queues; virtual memory maps chunks of the arena into reserved address
// ranges (host_vmm.hpp, checked by vmm_registry.hpp).
//
// Thread safety: the arena, the managed and page-locked tables, the streams, the IPC mappings and
// the virtual-memory registry have their own locks; one mutex guards the stream and event tables
// (and the streams a test marked as captured: simulate_stream_capture).
#include "copy_range.hpp"
#include "host_arena.hpp"
#include "host_errors.hpp"
#include "host_ipc.hpp"
#include "host_managed.hpp"
#include "host_page_locked.hpp"
#include "host_stream.hpp"
#include "host_vmm.hpp"
#include "vmm_registry.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/detail/thread_identity.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

using namespace detail::host;

// The per-thread default stream's handle, the value CUDA gives cudaStreamPerThread.
stream_handle const per_thread_handle = reinterpret_cast<stream_handle>(std::uintptr_t{0x2});
// cudaStreamLegacy: the legacy default stream, which the null handle names too (the host backend
// has no per-thread default-stream compilation mode).
stream_handle const legacy_handle = reinterpret_cast<stream_handle>(std::uintptr_t{0x1});

// Moves whenever a host backend destroys a stream or is destroyed itself: a stream id a thread
// remembers (host_backend::stream_id) is good while this has not moved.
std::atomic<std::uint64_t> stream_generation{0};

// The last stream whose id the calling thread asked for (trivial: no destructor at thread exit).
struct remembered_stream_id {
  void const* backend;
  stream_handle handle;
  std::uint64_t id;
  std::uint64_t generation;
};
GPUMEM_TLS_INITIAL_EXEC thread_local remembered_stream_id last_stream_id{};

class host_backend final : public detail::vmm_backend {
 public:
  explicit host_backend(host_backend_options options)
      : arena_(options.capacity, options.alignment), vmm_(make_host_vmm_operations(arena_)) {}

  ~host_backend() override {
    stream_generation.fetch_add(1, std::memory_order_acq_rel);
    // Streams first: their queued tasks may still touch the arena.
    default_stream_.reset();
    per_thread_streams_.clear();
    streams_.clear();
    vmm_.release_all();
  }

  backend_kind kind() const noexcept override { return backend_kind::host; }
  std::string description() override {
    return "host: simulated device, " + format_bytes(arena_.capacity());
  }

  int device_count() override { return 1; }
  int current_device() override { return 0; }
  void set_current_device(int ordinal) override {
    if (ordinal != 0)
      fail(invalid_device, "cudaErrorInvalidDevice", "set_current_device",
           "device " + std::to_string(ordinal) + " does not exist (the host backend has 1)");
  }
  device_identity identity(int ordinal) override {
    set_current_device(ordinal);
    device_identity id;
    id.ordinal = 0;
    std::memcpy(id.uuid.data(), "gpumem-host-dev0", 16);
    id.name = "gpumem host device";
    return id;
  }
  memory_info get_memory_info() override { return arena_.info(); }
  void synchronize() override {
    // Kept alive while waited for: another thread may destroy a stream meanwhile (as CUDA allows a
    // device-wide synchronisation beside a cudaStreamDestroy); the last owner then deletes it.
    std::vector<std::shared_ptr<stream_impl>> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      all.reserve(streams_.size() + per_thread_streams_.size());
      for (auto& entry : streams_)
        all.push_back(entry.second);
      for (auto& entry : per_thread_streams_)
        all.push_back(entry.second.stream);
    }
    default_stream().synchronize();
    for (auto const& s : all)
      s->synchronize();
  }

  // --- device memory ---
  void* allocate(std::size_t bytes) override { return arena_.allocate(bytes, "allocate"); }
  void deallocate(void* ptr) override {
    managed_.forget(ptr);
    arena_.free(ptr, "deallocate");
  }
  void* allocate_async(std::size_t bytes, stream_handle) override {
    return arena_.allocate(bytes, "allocate_async");
  }
  void deallocate_async(void* ptr, stream_handle stream) override {
    if (ptr == nullptr) return;
    stream_impl& s = resolve(stream);
    // Claimed now, so that a second free of it (in stream order or not) is refused at once rather
    // than reported on the stream's worker, or freeing the block of a later allocation at its
    // address once the first free has run.
    arena_.retire(ptr, "deallocate_async");
    managed_.forget(ptr);
    // Stream-ordered: the memory returns to the device when the stream reaches the free.
    try {
      s.enqueue([this, ptr] { arena_.free_retired(ptr, "deallocate_async"); });
    } catch (...) {
      arena_.unretire(ptr);
      throw;
    }
  }
  std::size_t set_async_release_threshold(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(release_threshold_, bytes);
  }
  void trim_async_pool(std::size_t) override {}

  void* allocate_managed(std::size_t bytes, bool) override {
    void* const p = arena_.allocate(bytes, "allocate_managed");
    if (p == nullptr) return p;
    try {
      managed_.add(p);
    } catch (...) {  // no memory for the record: the allocation is not made either
      arena_.free(p, "allocate_managed");
      throw;
    }
    return p;
  }
  void deallocate_managed(void* ptr) override {
    managed_.forget(ptr);
    arena_.free(ptr, "deallocate_managed");
  }

  // --- pinned / mapped host memory (host_page_locked.hpp) ---
  void* allocate_pinned(std::size_t bytes, host_alloc_flags flags) override {
    return page_locked_.allocate_pinned(bytes, flags);
  }
  void deallocate_pinned(void* ptr) override { page_locked_.deallocate_pinned(ptr); }
  void register_host(void* ptr, std::size_t bytes, bool mapped, bool) override {
    page_locked_memory::check_range(ptr, bytes);
    // As CUDA (checked on an H200): device memory is not host memory to register.
    if (arena_.find(ptr) || ipc_.find(ptr))
      fail(invalid_value, "cudaErrorInvalidValue", "register_host",
           pointer_text(ptr) + " is device memory, not host memory");
    page_locked_.register_host(ptr, bytes, mapped);
  }
  void unregister_host(void* ptr) override { page_locked_.unregister_host(ptr); }
  void* mapped_device_pointer(void* host_ptr) override {
    return page_locked_.mapped_device_pointer(host_ptr);
  }

  // --- copies ---
  // A null address or a range that wraps is cudaErrorInvalidValue, as CUDA reports it, checked
  // before anything is queued (a memmove on a stream's worker would take the process down).
  void copy(void* dst, void const* src, std::size_t bytes) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "host backend: copy", "destination");
    detail::check_copy_range(src, bytes, "host backend: copy", "source");
    // On the legacy stream, as cudaMemcpy: after the earlier work of every blocking stream.
    stream_impl& legacy = default_stream();
    legacy.enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
    legacy.synchronize();
  }
  void copy_async(void* dst, void const* src, std::size_t bytes, stream_handle stream) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "host backend: copy_async", "destination");
    detail::check_copy_range(src, bytes, "host backend: copy_async", "source");
    resolve(stream).enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  void fill(void* dst, int value, std::size_t bytes) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "host backend: fill", "destination");
    stream_impl& legacy = default_stream();  // as copy()
    legacy.enqueue([dst, value, bytes] { std::memset(dst, value, bytes); });
    legacy.synchronize();
  }
  void fill_async(void* dst, int value, std::size_t bytes, stream_handle stream) override {
    if (bytes == 0) return;
    detail::check_copy_range(dst, bytes, "host backend: fill_async", "destination");
    resolve(stream).enqueue([dst, value, bytes] { std::memset(dst, value, bytes); });
  }

  // --- streams ---
  stream_handle create_stream(bool non_blocking) override {
    auto s =
        new_stream(non_blocking ? stream_impl::kind::non_blocking : stream_impl::kind::blocking);
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.emplace(s.get(), s);
    return s.get();
  }
  void destroy_stream(stream_handle stream) override {
    if (stream == nullptr) return;
    stream_generation.fetch_add(1, std::memory_order_acq_rel);  // before its address can be reused
    std::shared_ptr<stream_impl> gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto const it = streams_.find(stream);
      if (it == streams_.end())
        fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "destroy_stream",
             pointer_text(stream) + " is not a live stream");
      gone = std::move(it->second);
      streams_.erase(it);
      if (capturing_.erase(stream) != 0)  // a new stream at this address is not captured
        simulated_captures_.store(capturing_.size(), std::memory_order_release);
    }
    // Deleted here, or by a synchronize() still waiting for it: the deletion completes the queued
    // work first, as cudaStreamDestroy does.
    gone.reset();
  }
  void synchronize_stream(stream_handle stream) override { resolve(stream).synchronize(); }
  bool query_stream(stream_handle stream) override { return resolve(stream).idle(); }
  // As CUDA's cudaStreamPerThread: one handle that names the calling thread's own stream.
  stream_handle per_thread_default_stream() override { return per_thread_handle; }
  // Asked by a pool on every call (its per-stream state is keyed by the id). A thread remembers
  // the last created stream it asked about until any stream is destroyed, so that the common case
  // takes no lock shared by all threads (resolve's); a destroyed stream is still reported, since
  // its destruction forgets every remembered id.
  std::uint64_t stream_id(stream_handle stream) override {
    if (stream == nullptr || stream == legacy_handle || stream == per_thread_handle)
      return resolve(stream).id;
    remembered_stream_id& last = last_stream_id;
    std::uint64_t const generation = stream_generation.load(std::memory_order_acquire);
    if (last.backend == this && last.handle == stream && last.generation == generation)
      return last.id;
    std::uint64_t const id = resolve(stream).id;
    last = {this, stream, id, generation};
    return id;
  }
  void enqueue_host_function(stream_handle stream, std::function<void()> fn) override {
    resolve(stream).enqueue(std::move(fn));
  }
  // No graphs here: only the streams a test marked (simulate_stream_capture) answer true. One
  // atomic load while none is marked, as a caller may ask on every allocation.
  bool stream_is_capturing(stream_handle stream) override {
    if (simulated_captures_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return capturing_.count(stream) != 0;
  }
  void simulate_capture(stream_handle stream, bool capturing) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capturing)
      capturing_.insert(stream);
    else
      capturing_.erase(stream);
    simulated_captures_.store(capturing_.size(), std::memory_order_release);
  }

  // --- events ---
  // Events are shared with the stream tasks that complete or wait for them, so destroying one with
  // a record still pending is safe, as cudaEventDestroy is: the object lives until those tasks ran.
  event_handle create_event(bool timing) override {
    auto event = std::make_shared<event_impl>(timing);
    std::lock_guard<std::mutex> lock(mutex_);
    events_.emplace(event.get(), event);
    return event.get();
  }
  void destroy_event(event_handle event) override {
    if (event == nullptr) return;
    std::shared_ptr<event_impl> last_reference;  // released after the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end())
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "destroy_event",
           pointer_text(event) + " is not a live event");
    last_reference = std::move(it->second);
    events_.erase(it);
  }
  void record_event(event_handle handle, stream_handle stream) override {
    std::shared_ptr<event_impl> event = live_event(handle, "record_event");
    auto record = std::make_shared<event_record>();
    // Queued first: an enqueue that fails leaves the event as it was.
    resolve(stream).enqueue([event, record] { event->complete(*record); });
    std::lock_guard<std::mutex> lock(event->mutex);
    event->latest = std::move(record);
  }
  bool query_event(event_handle handle) override {
    return live_event(handle, "query_event")->query();
  }
  void synchronize_event(event_handle handle) override {
    std::shared_ptr<event_impl> event = live_event(handle, "synchronize_event");
    event->wait_for(event->current());
  }
  void stream_wait_event(stream_handle stream, event_handle handle) override {
    std::shared_ptr<event_impl> event = live_event(handle, "stream_wait_event");
    resolve(stream).enqueue([event, record = event->current()] { event->wait_for(record); });
  }
  float elapsed_ms(event_handle start_handle, event_handle stop_handle) override {
    std::shared_ptr<event_impl> const start = live_event(start_handle, "elapsed_ms");
    std::shared_ptr<event_impl> const stop = live_event(stop_handle, "elapsed_ms");
    if (!start->timing || !stop->timing)
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "elapsed_ms",
           "an event was created without timing");
    std::shared_ptr<event_record> const first = start->current();
    std::shared_ptr<event_record> const last = stop->current();
    if (first == nullptr || last == nullptr)  // as CUDA: an event never recorded has no time
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "elapsed_ms",
           "an event has never been recorded");
    if (!start->query() || !stop->query())
      fail(not_ready, "cudaErrorNotReady", "elapsed_ms", "an event has not completed");
    auto const done_at = [](event_impl& e, event_record const& r) {
      std::lock_guard<std::mutex> lock(e.mutex);
      return r.done_at;
    };
    return std::chrono::duration<float, std::milli>(done_at(*stop, *last) - done_at(*start, *first))
        .count();
  }

  // --- addresses and IPC (host_ipc.hpp) ---
  address_range get_address_range(void const* ptr) override {
    if (auto range = arena_.find(ptr)) return *range;
    if (auto opened = ipc_.find(ptr)) return *opened;  // another process's, opened here
    fail(invalid_value, "cudaErrorInvalidValue", "get_address_range",
         pointer_text(ptr) + " is not inside a device allocation");
  }
  ipc_memory_handle ipc_get_handle(void* allocation_base) override {
    address_range const range = get_address_range(allocation_base);
    if (range.base != allocation_base)
      fail(invalid_value, "cudaErrorInvalidValue", "ipc_get_handle",
           pointer_text(allocation_base) + " is not the base of an allocation");
    if (managed_.contains(allocation_base))  // as cudaIpcGetMemHandle (checked on an H200): IPC
                                             // exports device memory only
      fail(invalid_value, "cudaErrorInvalidValue", "ipc_get_handle",
           pointer_text(allocation_base) + " is managed memory, which IPC cannot export");
    return host_ipc::export_range(arena_, range);
  }
  void* ipc_open(ipc_memory_handle const& handle) override { return ipc_.open(handle); }
  void ipc_close(void* ptr) override { ipc_.close(ptr); }

  // --- virtual memory: vmm_backend forwards to vmm_ (host_vmm.hpp) ---
  detail::vmm_registry& vmm() noexcept override { return vmm_; }

 private:
  stream_impl& default_stream() {
    std::call_once(default_once_,
                   [this] { default_stream_ = new_stream(stream_impl::kind::legacy); });
    return *default_stream_;
  }
  // A destroyed stream is an error the caller sees (cudaErrorInvalidResourceHandle), as it
  // usually is on CUDA, never a use of freed memory: tests of stream lifetimes rely on it.
  stream_impl& resolve(stream_handle stream) {
    if (stream == nullptr || stream == legacy_handle) return default_stream();
    if (stream == per_thread_handle) return this_thread_stream();
    std::lock_guard<std::mutex> lock(mutex_);
    if (streams_.count(stream) == 0)
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", "stream",
           pointer_text(stream) + " is not a live stream (destroyed, or never created)");
    return *stream;
  }
  // The calling thread's per-thread stream, keyed by its serial (a thread id is reused by the next
  // thread created: that thread must get a new stream, not the work queue of a dead one). The
  // streams of threads that have exited are destroyed once idle, when a new thread makes its own.
  stream_impl& this_thread_stream() {
    std::uint64_t const serial = detail::this_thread_serial();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = per_thread_streams_.find(serial);
    if (it != per_thread_streams_.end()) return *it->second.stream;
    for (auto dead = per_thread_streams_.begin(); dead != per_thread_streams_.end();) {
      if (dead->second.owner.expired() && dead->second.stream->idle())
        dead = per_thread_streams_.erase(dead);
      else
        ++dead;
    }
    // Per-thread default streams are blocking streams (they order with the legacy stream).
    per_thread_stream entry{detail::this_thread_lifetime(),
                            new_stream(stream_impl::kind::blocking)};
    return *per_thread_streams_.emplace(serial, std::move(entry)).first->second.stream;
  }
  // A stream of `kind`, known to the legacy ordering unless it is non-blocking.
  std::shared_ptr<stream_impl> new_stream(stream_impl::kind kind) {
    if (kind == stream_impl::kind::non_blocking) return std::make_shared<stream_impl>(kind);
    auto s = std::make_shared<stream_impl>(kind, ordering_);
    ordering_->add(s);
    return s;
  }
  std::shared_ptr<event_impl> live_event(event_handle event, char const* call) {
    if (event == nullptr)
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", call, "null event");
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end())
      fail(invalid_resource_handle, "cudaErrorInvalidResourceHandle", call,
           pointer_text(event) + " is not a live event");
    return it->second;
  }

  host_arena arena_;
  detail::vmm_registry vmm_;  // after arena_: its operations use the arena
  std::mutex mutex_;
  std::size_t release_threshold_ = 0;
  managed_allocations managed_;
  page_locked_memory page_locked_;
  host_ipc ipc_;
  std::map<stream_impl*, std::shared_ptr<stream_impl>> streams_;  // owned; keyed by handle
  std::unordered_map<event_impl*, std::shared_ptr<event_impl>> events_;
  struct per_thread_stream {
    std::weak_ptr<void const> owner;  // expires when the thread exits
    std::shared_ptr<stream_impl> stream;
  };
  std::unordered_map<std::uint64_t, per_thread_stream> per_thread_streams_;
  std::once_flag default_once_;
  // The legacy stream's implicit synchronisation with the blocking streams (host_stream.hpp).
  std::shared_ptr<legacy_ordering> ordering_ = std::make_shared<legacy_ordering>();
  std::shared_ptr<stream_impl> default_stream_;
  std::unordered_set<stream_handle> capturing_;     // simulate_stream_capture's marks
  std::atomic<std::size_t> simulated_captures_{0};  // capturing_.size()
};

}  // namespace

std::unique_ptr<device_backend> make_host_backend(host_backend_options options) {
  return std::make_unique<host_backend>(options);
}

void simulate_stream_capture(device_backend& host, stream_handle stream, bool capturing) {
  auto* const simulated = dynamic_cast<host_backend*>(&host);
  if (simulated == nullptr)
    throw not_supported(std::string("simulate_stream_capture: the ") + to_string(host.kind()) +
                        " backend does not simulate captures (only the host backend does)");
  simulated->simulate_capture(stream, capturing);
}

}  // namespace gpumem
