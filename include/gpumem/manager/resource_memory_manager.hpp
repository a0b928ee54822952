// gpumem/manager/resource_memory_manager.hpp
//
// A memory manager whose device memory comes from any gpumem::memory_resource (mr/), so that a
// plugin built on a resource is a few lines:
//
//   set_memory_manager([](context& ctx) {
//     return std::make_unique<resource_memory_manager>(ctx, std::make_shared<my_resource>());
//   });
//
// memalloc -> resource->allocate(bytes, null stream), with no synchronisation. When the last owner
// goes, the free is QUEUED on the context's pending_deallocations (Numba's deferred deallocation:
// NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT / _RATIO, flushed on reset() and out-of-memory; nothing is
// freed inside defer_cleanup()). The manager sets the queue's release barrier, ONE device
// synchronisation, after which the released frees go back to the resource on the null stream; a
// batch the queue passes its limits with is retired and released with later ones behind one
// barrier (pending_deallocations.hpp: up to 16 times the count limit, 1/16 of the byte limit).
// That is what makes EMM memory safe to use on any stream (the EMM has none) without a wait per
// call: see the comment above memalloc in resource_memory_manager.cpp. A caller that knows a block
// is idle (it waited for its work) frees it with memory_pointer::release_idle: at once on the null
// stream, without the queue or its synchronisation (queued as usual inside defer_cleanup()); the
// spill manager does this for the device memory of a buffer it has copied out. A free after the
// context is closed runs at once (after the barrier); failures there are logged, never thrown.
// After close_for_device_reset(device) (context.hpp) a late free only uncounts its block. Out of
// memory: the context's queue is flushed and the `on_out_of_memory` hook (if any) is asked to free
// memory (a spill manager, a pool trim); then the allocation is retried exactly once.
// allocate(bytes, stream) -> resource->allocate(bytes, stream) with the same out-of-memory
// recovery; the pointer's last owner frees on that stream (memory_manager.hpp). allocate_unowned
// is the same without an owner (unowned()->deallocate frees), and memalloc_unowned is memalloc's
// allocation without an owner (unowned()->deallocate_deferred queues its free). Each pointer
// costs one heap record (its owner, which frees in its destructor) and a deferred free one slot
// in the queue.
// release_stream and the held bytes of get_memory_statistics() ask the hooks (a pool's
// release_stream and chunks). get_memory_info forwards the resource's (which may throw
// not_supported). reset() flushes the queue (device and host frees) and calls the `on_reset` hook.
// IPC: ipc_mixin (valid for resources over cudaMalloc). With GPUMEM_DEBUG_MEMORY on when the
// manager is made, the resource is wrapped in the debug adaptor (tracking_adaptor): resource() and
// debug_tracker() are that adaptor.
//
// Ownership: the resource is shared with every pointer's finalizer, so it outlives all memory it
// handed out, even after the context is closed. Thread safety: as the resource's (the manager
// adds no state beyond the hooks, which are set at construction).
#pragma once

#include <gpumem/manager/context.hpp>
#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/manager/ipc_mixin.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace gpumem {

namespace detail {
struct usage_counters;
class block_state;
}  // namespace detail

class resource_memory_manager : public ipc_mixin<host_only_memory_manager> {
 public:
  struct hooks {
    // Called on out-of-memory with the requested bytes, before the single retry. Returns true if
    // it may have freed something (the retry happens either way).
    std::function<bool(std::size_t)> on_out_of_memory;
    // Called by reset() after the host side has been reset.
    std::function<void()> on_reset;
    // Called by release_stream(stream) (a pool's release_stream).
    std::function<void(stream_handle)> on_release_stream;
    // Called by the destructor (the context's close, after its queue was flushed), with the
    // device current and the reason the context ends: release what can be released while the
    // device's CUDA context is alive (a pool closes: it waits for the device, gives back every
    // chunk not holding a live block and destroys its events and streams). Memory still live is
    // freed later by its owners' finalizers; after context_end::device_reset those make no device
    // call at all (the manager skips the resource's deallocate; the reset frees the memory).
    std::function<void(context_end)> on_close;
    // The bytes the resource holds from the device, for get_memory_statistics(); without it
    // held_bytes is bytes_in_use.
    std::function<std::size_t()> held_bytes;
  };

  // `resource` must not be null (logic_error). `name` defaults to the resource's name.
  resource_memory_manager(context& owner, std::shared_ptr<memory_resource> resource,
                          hooks callbacks = {}, std::string name = {});
  // Runs the on_close hook (errors are logged).
  ~resource_memory_manager() override;

  memory_pointer memalloc(std::size_t bytes) override;
  memory_pointer allocate(std::size_t bytes, stream_handle stream) override;
  void release_stream(stream_handle stream) override;
  memory_statistics get_memory_statistics() const override;
  unowned_blocks* unowned() const noexcept override;
  void* allocate_unowned(std::size_t bytes, stream_handle stream) override;
  void* memalloc_unowned(std::size_t bytes) override;
  memory_info get_memory_info() override;
  void reset() override;
  int interface_version() const override { return memory_manager_interface_version; }
  std::string name() const override { return name_; }

  // The resource memalloc allocates from (the debug adaptor over the given one when debugging).
  memory_resource& resource() const noexcept { return *resource_; }
  tracking_adaptor* debug_tracker() const noexcept override;

 protected:
  bool release_for_retry(std::size_t bytes) override;

 private:
  std::shared_ptr<memory_resource> resource_;
  std::shared_ptr<tracking_adaptor> resource_debug_;  // null unless GPUMEM_DEBUG_MEMORY
  std::shared_ptr<detail::usage_counters> counters_;  // shared with the finalizers
  // What a block's owner needs to free it (resource, counters, device, queue): ONE shared
  // reference per block, held by its owner record (or by the caller, for unowned blocks).
  std::shared_ptr<detail::block_state> blocks_;
  hooks hooks_;
  std::string name_;
};

}  // namespace gpumem
