#include "resource_support.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/mr/debug_memory.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

namespace gpumem {

tracking_adaptor::tracking_adaptor(memory_resource& upstream, tracking_options options)
    : upstream_(&upstream), options_(options) {
  if (upstream.selects_own_device()) device_ = detail::device_of(upstream);
}

tracking_adaptor::~tracking_adaptor() {
  if (options_.report_leaks_on_destruction) report_outstanding(log_level::warn);
}

std::vector<outstanding_allocation> tracking_adaptor::outstanding() const {
  std::vector<outstanding_allocation> result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result.reserve(live_.size());
    for (auto const& entry : live_)
      result.push_back(entry.second);
  }
  std::sort(result.begin(), result.end(),
            [](auto const& a, auto const& b) { return a.sequence < b.sequence; });
  return result;
}

std::size_t tracking_adaptor::outstanding_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t total = 0;
  for (auto const& entry : live_)
    total = saturating_add(total, entry.second.bytes);
  return total;
}

std::size_t tracking_adaptor::report_outstanding(log_level level) const {
  try {
    auto const leaks = outstanding();
    for (auto const& a : leaks) {
      log(level, name() + ": outstanding allocation #" + std::to_string(a.sequence) + " " +
                     detail::pointer_text(a.pointer) + " of " + std::to_string(a.bytes) +
                     " bytes (stream " + detail::stream_text(a.stream) + ")");
    }
    return leaks.size();
  } catch (...) {
    return 0;  // reporting must never throw (it runs in the destructor)
  }
}

std::size_t tracking_adaptor::double_frees() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return double_frees_;
}
std::size_t tracking_adaptor::unknown_frees() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unknown_frees_;
}
std::size_t tracking_adaptor::wrong_size_frees() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wrong_size_frees_;
}

void* tracking_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* p = upstream_->allocate(bytes, stream);
  if (p == nullptr) return p;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    // A stale entry may stay in the order deque; when it expires, a later double free of `p`
    // reads as an unknown free (still reported, still not passed upstream).
    recently_freed_.erase(p);
    live_[p] = outstanding_allocation{p, bytes, stream, ++sequence_};
  } catch (...) {
    upstream_->deallocate(p, bytes, stream);
    throw;
  }
  return p;
}

void tracking_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  if (ptr == nullptr) return;
  std::string problem;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) {
      if (recently_freed_.count(ptr) != 0) {
        ++double_frees_;
        problem = "double free of " + detail::pointer_text(ptr) + " (" + std::to_string(bytes) +
                  " bytes, stream " + detail::stream_text(stream) + ")";
      } else {
        ++unknown_frees_;
        problem = "free of " + detail::pointer_text(ptr) + " (" + std::to_string(bytes) +
                  " bytes), which this resource did not allocate or freed long ago";
      }
    } else if (it->second.bytes != bytes) {
      ++wrong_size_frees_;
      problem = "wrong-size free of " + detail::pointer_text(ptr) + ": allocated " +
                std::to_string(it->second.bytes) + " bytes (allocation #" +
                std::to_string(it->second.sequence) + "), freed with " + std::to_string(bytes);
    } else {
      live_.erase(it);
      if (options_.remembered_frees != 0) {
        recently_freed_.insert(ptr);
        recently_freed_order_.push_back(ptr);
        while (recently_freed_order_.size() > options_.remembered_frees) {
          recently_freed_.erase(recently_freed_order_.front());
          recently_freed_order_.pop_front();
        }
      }
    }
  } catch (...) {
    detail::report_deallocate_failure(name(), ptr, bytes);
    return;  // the table may be inconsistent for this pointer: keep the memory rather than risk it
  }
  if (!problem.empty()) {
    report_refused_deallocation();
    log(log_level::error, name() + ": " + problem + "; the free is not passed upstream");
    return;
  }
  if (options_.poison_on_free) {
    try {
      poison(ptr, bytes, stream);
    } catch (...) {
      // Only logged: the free still goes upstream below, so it is not a refused one (reporting it
      // so would make every counting adaptor above keep the freed bytes for good).
      detail::log_deallocate_failure(name() + " (poisoning)", ptr, bytes);
    }
  }
  upstream_->deallocate(ptr, bytes, stream);
}

// On the upstream's backend: `stream` is one of its streams, and the upstream orders its free after
// that stream's work (the process-wide backend's stream would run the fill at any time, maybe after
// the memory was handed out again). The null and per-thread handles name a stream of the current
// device: over an upstream that selects its own device, the caller's may be another, so the
// adaptor's device is made current for the call.
void tracking_adaptor::poison(void* ptr, std::size_t bytes, stream_handle stream) {
  int const value = options_.poison_byte;
  device_backend& device = detail::backend_of(*upstream_);
  std::optional<detail::scoped_device> on_device;
  if (device_ >= 0) on_device.emplace(device, device_);
  if (upstream_->properties().host_accessible) {
    device.enqueue_host_function(stream, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  } else {
    device.fill_async(ptr, value, bytes, stream);
  }
}

// --- debug_memory.hpp
// -----------------------------------------------------------------------------

bool debug_memory_enabled() {
  return environment_snapshot().debug_memory;
}

std::unique_ptr<memory_resource> wrap_for_debug_if_enabled(
    std::unique_ptr<memory_resource> resource, tracking_options options) {
  GPUMEM_EXPECTS(resource != nullptr, "wrap_for_debug_if_enabled: the resource must not be null");
  if (!debug_memory_enabled()) return resource;
  return make_owning_adaptor<tracking_adaptor>(std::move(resource), options);
}

std::unique_ptr<tracking_adaptor> make_debug_adaptor_if_enabled(memory_resource& resource,
                                                                tracking_options options) {
  if (!debug_memory_enabled()) return nullptr;
  return std::make_unique<tracking_adaptor>(resource, options);
}

std::shared_ptr<tracking_adaptor> make_shared_tracking_adaptor(
    std::shared_ptr<memory_resource> upstream, tracking_options options) {
  GPUMEM_EXPECTS(upstream != nullptr,
                 "make_shared_tracking_adaptor: the upstream must not be null");
  // One allocation holds both; the adaptor is declared last, so it is destroyed first.
  struct shared_stack {
    shared_stack(std::shared_ptr<memory_resource> u, tracking_options o)
        : upstream(std::move(u)), adaptor(*upstream, o) {}
    std::shared_ptr<memory_resource> upstream;
    tracking_adaptor adaptor;
  };
  auto stack = std::make_shared<shared_stack>(std::move(upstream), options);
  return std::shared_ptr<tracking_adaptor>(stack, &stack->adaptor);
}

}  // namespace gpumem
