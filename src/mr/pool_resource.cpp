// pool_resource: the public face of the pool; the work is in pool_state (pool_state.cpp, the
// shared back end; pool_thread_cache.cpp, the per-thread front end).
#include "pool_state.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

namespace gpumem {

pool_resource::pool_resource(memory_resource& upstream, pool_options options)
    : state_(std::make_unique<detail::pool_state>(upstream, options)) {}

pool_resource::~pool_resource() = default;

std::string pool_resource::name() const {
  return state_->name();
}

memory_info pool_resource::get_memory_info() const {
  return state_->memory_info_snapshot();
}

pool_statistics pool_resource::statistics() const {
  return state_->statistics();
}

void pool_resource::check_invariants() const {
  state_->check_invariants();
}

std::size_t pool_resource::trim() {
  return state_->trim();
}

void pool_resource::release_stream(stream_handle stream) {
  state_->release_stream(stream);
}

void pool_resource::close(pool_live_chunks live) {
  state_->close(live);
}

pool_options const& pool_resource::options() const noexcept {
  return state_->options();
}

int pool_resource::own_device() const noexcept {
  return state_->device();
}

device_backend* pool_resource::backend_in_use() const noexcept {
  return &state_->stream_backend();
}

memory_resource& pool_resource::upstream() const noexcept {
  return state_->upstream();
}

// The refusals and the error rewrite of do_allocate, out of line: their messages' string
// temporaries would otherwise give every allocation a 488-byte stack frame and six register saves.
namespace {

[[noreturn]] __attribute__((noinline, cold)) void refuse_allocation(pool_resource const& pool,
                                                                    detail::pool_state& state,
                                                                    std::size_t bytes) {
  GPUMEM_EXPECTS(!state.is_closed(), pool.name() + ": allocate(" + std::to_string(bytes) +
                                         ") after close(): the pool no longer uses its device");
  pool_statistics const s = state.statistics();
  throw out_of_memory(bytes, pool.name(), s.held_bytes, s.peak_held_bytes,
                      "cannot allocate " + std::to_string(bytes) +
                          " bytes: above the largest allocation gpumem serves (" +
                          format_bytes(max_allocation_bytes) + ")");
}

// The pool names the block it looked for (the request rounded to its granularity or size class);
// the error the caller sees names what it asked for.
[[noreturn]] __attribute__((noinline, cold)) void rethrow_for_request(out_of_memory const& e,
                                                                      std::size_t bytes) {
  throw out_of_memory(
      bytes, e.allocator(), e.current_bytes(), e.peak_bytes(),
      "as a block of " + std::to_string(e.requested_bytes()) + " bytes: " + e.what());
}

}  // namespace

void* pool_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  if (bytes == 0) return nullptr;
  // Refused here, before any rounding inside the pool (to 256 bytes, to a size class, to the growth
  // granularity) could wrap it to a small size and hand out memory that overlaps live blocks.
  if (__builtin_expect(state_->is_closed() || bytes > max_allocation_bytes, 0))
    refuse_allocation(*this, *state_, bytes);
  try {
    return state_->allocate(bytes, stream);
  } catch (out_of_memory const& e) {
    if (e.requested_bytes() == bytes) throw;
    rethrow_for_request(e, bytes);
  }
}

void pool_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  state_->deallocate(ptr, bytes, stream);
}

}  // namespace gpumem
