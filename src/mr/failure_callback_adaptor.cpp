#include "resource_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>

#include <algorithm>
#include <optional>
#include <vector>

namespace gpumem {

namespace {
// The adaptors whose callback is running on this thread (innermost last). Short: nesting happens
// only when a callback allocates through another adaptor that then fails too.
thread_local std::vector<failure_callback_adaptor const*> callbacks_running;

bool callback_running(failure_callback_adaptor const* adaptor) {
  return std::find(callbacks_running.begin(), callbacks_running.end(), adaptor) !=
         callbacks_running.end();
}

class running_scope {
 public:
  explicit running_scope(failure_callback_adaptor const* adaptor) {
    callbacks_running.push_back(adaptor);
  }
  ~running_scope() { callbacks_running.pop_back(); }
  running_scope(running_scope const&) = delete;
  running_scope& operator=(running_scope const&) = delete;
};
}  // namespace

failure_callback_adaptor::failure_callback_adaptor(memory_resource& upstream,
                                                   allocation_failure_callback callback,
                                                   failure_callback_options options)
    : upstream_(&upstream), callback_(std::move(callback)), options_(options) {
  GPUMEM_EXPECTS(static_cast<bool>(callback_), "failure_callback_adaptor: the callback is empty");
  GPUMEM_EXPECTS(options_.max_retries >= 0,
                 "failure_callback_adaptor: max_retries must be >= 0, got " +
                     std::to_string(options_.max_retries));
  if (upstream.selects_own_device()) device_ = detail::device_of(upstream);
}

void* failure_callback_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  for (int attempt = 0;; ++attempt) {
    try {
      return upstream_->allocate(bytes, stream);
    } catch (out_of_memory const&) {
      if (attempt >= options_.max_retries || callback_running(this)) throw;
      bool retry;
      {
        running_scope scope(this);
        std::optional<detail::scoped_device> on_device;
        if (device_ >= 0) on_device.emplace(detail::backend_of(*upstream_), device_);
        retry = callback_(bytes, attempt);
      }
      if (!retry) throw;
    }
  }
}

}  // namespace gpumem
