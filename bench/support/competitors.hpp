// bench_alloc's competitors, each a gpumem::memory_resource so that every one pays the same
// virtual call: cudaMalloc, cudaMallocAsync, PyTorch's caching allocator and RMM's pool and arena
// (the last two when their libraries were found), and the pools' upstream with its time counted;
// make_competitors() lists them, gpumem's pools first.
#pragma once

#include "alloc_args.hpp"
#include "rmm_resources.hpp"
#include "torch_allocator.hpp"

#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/memory_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "bench_support.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace gpumem::bench {

// An allocator measured: how to make it, how much of each trace it runs, and what to do around a
// measurement.
struct competitor {
  std::string name;
  double pair_scale;  // fraction of the pool's trace length this one runs
  bool warm_up;
  std::function<std::unique_ptr<memory_resource>()> make;
  std::function<void()> before;  // set up (e.g. the async release threshold)
  std::function<void()> after;   // give memory back between cases
};

class malloc_resource final : public memory_resource {  // cudaMalloc / cudaFree
 public:
  std::string name() const override { return "cudaMalloc"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle) override { return backend().allocate(bytes); }
  void do_deallocate(void* p, std::size_t, stream_handle) noexcept override {
    backend().deallocate(p);
  }
};

class malloc_async_resource final : public memory_resource {  // cudaMallocAsync / cudaFreeAsync
 public:
  std::string name() const override { return "cudaMallocAsync"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    return backend().allocate_async(bytes, s);
  }
  void do_deallocate(void* p, std::size_t, stream_handle s) noexcept override {
    backend().deallocate_async(p, s);
  }
};

class torch_resource final : public memory_resource {
 public:
  std::string name() const override { return "PyTorch"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    return torch_allocate(bytes, static_cast<void*>(s));
  }
  void do_deallocate(void* p, std::size_t, stream_handle) noexcept override { torch_deallocate(p); }
};

class rmm_resource final : public memory_resource {
 public:
  explicit rmm_resource(rmm_kind kind) : kind_(kind), mr_(rmm_create(kind)) {}
  ~rmm_resource() override { rmm_destroy(mr_); }
  rmm_resource(rmm_resource const&) = delete;
  rmm_resource& operator=(rmm_resource const&) = delete;
  std::string name() const override { return kind_ == rmm_kind::pool ? "RMM pool" : "RMM arena"; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    return rmm_allocate(mr_, bytes, static_cast<void*>(s));
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle s) noexcept override {
    rmm_deallocate(mr_, p, bytes, static_cast<void*>(s));
  }
  rmm_kind kind_;
  void* mr_;
};

// The pools' upstream: cuda_resource, with the time its allocations take (growth inside a timed run
// shows up here; cudaMalloc calls made by many threads at once wait for each other in the driver).
class timed_upstream final : public memory_resource {
 public:
  std::string name() const override { return inner_.name(); }
  double seconds() const { return static_cast<double>(ns_.load()) * 1e-9; }
  memory_info get_memory_info() const override { return inner_.get_memory_info(); }
  resource_properties properties() const noexcept override { return inner_.properties(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle s) override {
    stopwatch clock;
    void* p = inner_.allocate(bytes, s);
    ns_.fetch_add(static_cast<std::uint64_t>(clock.seconds() * 1e9));
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, stream_handle s) noexcept override {
    inner_.deallocate(p, bytes, s);
  }

  cuda_resource inner_;
  std::atomic<std::uint64_t> ns_{0};
};

// The allocators bench_alloc measures: gpumem's pools (chunked, and expandable where the backend
// maps memory) over `upstream`, with the options of `args` (which must outlive them), then, unless
// `pool_only`, cudaMalloc, cudaMallocAsync (release threshold high and 0), and on CUDA PyTorch's
// allocator and RMM's pool and arena where found.
inline std::vector<competitor> make_competitors(alloc_args const& args, timed_upstream& upstream,
                                                bool cuda, bool pool_only) {
  std::vector<competitor> all;
  all.push_back({"gpumem pool", 1.0, true,
                 [&] {
                   pool_options o;
                   o.wait_across_streams = args.wait_across_streams;
                   o.query_other_streams = args.query_other_streams;
                   o.max_cached_size = args.max_cached_size;
                   return std::make_unique<pool_resource>(upstream, o);
                 },
                 nullptr, nullptr});
  // The same pool growing inside one reserved virtual range (pool_options::expandable).
  if (backend().vmm_granularity() > 0)
    all.push_back({"gpumem expandable", 1.0, true,
                   [&] {
                     pool_options o;
                     o.expandable = true;
                     o.held_target = args.held_target;
                     o.query_other_streams = args.query_other_streams;
                     o.max_cached_size = args.max_cached_size;
                     return std::make_unique<pool_resource>(upstream, o);
                   },
                   nullptr, nullptr});
  if (pool_only) return all;
  all.push_back({"cudaMalloc", 0.01, false, [] { return std::make_unique<malloc_resource>(); },
                 nullptr, nullptr});
  all.push_back(
      {"cudaMallocAsync", 0.1, true, [] { return std::make_unique<malloc_async_resource>(); },
       [] { backend().set_async_release_threshold(std::numeric_limits<std::size_t>::max()); },
       [] { backend().trim_async_pool(0); }});
  all.push_back({"cudaMallocAsync thr=0", 0.05, true,
                 [] { return std::make_unique<malloc_async_resource>(); },
                 [] { backend().set_async_release_threshold(0); },
                 [] { backend().trim_async_pool(0); }});
  if (cuda && torch_available())
    all.push_back({"PyTorch", 0.1, true, [] { return std::make_unique<torch_resource>(); }, nullptr,
                   [] { torch_empty_cache(); }});
  if (cuda && rmm_available()) {
    all.push_back({"RMM pool", 0.1, true,
                   [] { return std::make_unique<rmm_resource>(rmm_kind::pool); }, nullptr,
                   nullptr});
    all.push_back({"RMM arena", 0.1, true,
                   [] { return std::make_unique<rmm_resource>(rmm_kind::arena); }, nullptr,
                   nullptr});
  }
  return all;
}

}  // namespace gpumem::bench
