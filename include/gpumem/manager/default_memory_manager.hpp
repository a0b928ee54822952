// gpumem/manager/default_memory_manager.hpp
//
// gpumem's own memory manager (the spec's NumbaCUDAMemoryManager), used when no plugin is set.
// Device memory comes from backend().allocate (cudaMalloc). When the last owner of a pointer goes,
// the free is queued on the context's pending_deallocations (Numba's deallocation behaviour):
// the queue is flushed past NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT items or
// NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO of device memory, on reset(), and when an allocation runs
// out of memory (flush, then retry exactly once; a second failure is gpumem::out_of_memory naming
// this manager with its bytes in use and peak). While a defer_cleanup() guard is alive nothing is
// freed — not even on out-of-memory (as Numba).
//
// Host memory and managed memory: as host_only_memory_manager. IPC: ipc_mixin.
//
// Thread safety: allocation may be called from any thread; statistics are atomic counters read
// without a lock (a snapshot may mix counters of concurrent calls). Finalizers capture the
// statistics and the queue by shared ownership, never `this`.
#pragma once

#include <gpumem/manager/host_only_memory_manager.hpp>
#include <gpumem/manager/ipc_mixin.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace gpumem {

namespace detail {
struct usage_counters;
}  // namespace detail

class default_memory_manager final : public ipc_mixin<host_only_memory_manager> {
 public:
  struct statistics {
    std::size_t allocations = 0;    // memalloc calls that returned memory
    std::size_t frees = 0;          // device frees actually performed
    std::size_t bytes_in_use = 0;   // device bytes allocated and not yet freed (incl. pending)
    std::size_t peak_bytes = 0;     // highest bytes_in_use
    std::size_t pending_count = 0;  // the context's queue, at the time of the call
    std::size_t pending_bytes = 0;
    std::size_t out_of_memory_retries = 0;  // allocations that succeeded after a flush
  };

  explicit default_memory_manager(context& owner);
  ~default_memory_manager() override;

  memory_pointer memalloc(std::size_t bytes) override;
  memory_info get_memory_info() override;
  int interface_version() const override { return memory_manager_interface_version; }
  std::string name() const override { return "default"; }

  statistics get_statistics() const;
  // get_statistics() as the manager-neutral snapshot (held_bytes = bytes_in_use: no cache).
  memory_statistics get_memory_statistics() const override;

  // Called on out-of-memory after the flush and before the single retry, with the requested
  // bytes (a spill manager frees device memory here). Returns true if it may have freed
  // something; the retry happens either way. Set it before other threads allocate.
  void set_out_of_memory_handler(std::function<bool(std::size_t)> handler) {
    out_of_memory_handler_ = std::move(handler);
  }

 private:
  std::shared_ptr<detail::usage_counters> counters_;
  std::function<bool(std::size_t)> out_of_memory_handler_;
};

}  // namespace gpumem
