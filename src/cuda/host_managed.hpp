// Internal to the host backend: which allocations of the arena are managed memory
// (allocate_managed), since CUDA treats it differently from device memory (cudaIpcGetMemHandle
// refuses it, checked on an H200). Any free of the backend forgets a managed allocation (as
// cudaFree frees both kinds), before the arena can hand its address to a device allocation.
//
// Thread safety: every member may be called from any thread (one mutex). While no managed
// allocation is live, forget() and contains() take no lock but one atomic load, so that frees of
// device memory do not contend (the allocation of a managed pointer happened before its free,
// so the count that includes it is seen).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_set>

namespace gpumem::detail::host {

class managed_allocations {
 public:
  void add(void* base) {
    std::lock_guard<std::mutex> lock(mutex_);
    bases_.insert(base);
    live_.store(bases_.size(), std::memory_order_release);
  }
  void forget(void* base) {
    if (base == nullptr || live_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (bases_.erase(base) != 0) live_.store(bases_.size(), std::memory_order_release);
  }
  bool contains(void* base) const {
    if (live_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return bases_.count(base) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<void*> bases_;   // bases of allocate_managed's live allocations
  std::atomic<std::size_t> live_{0};  // bases_.size(), read without mutex_
};

}  // namespace gpumem::detail::host
