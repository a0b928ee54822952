// pool_resource: the public face of the pool; the work is in pool_state (pool_state.cpp, the
// shared back end; pool_thread_cache.cpp, the per-thread front end).
#include "pool_state.hpp"

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

pool_options const& pool_resource::options() const noexcept {
  return state_->options();
}

memory_resource& pool_resource::upstream() const noexcept {
  return state_->upstream();
}

void* pool_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  if (bytes == 0) return nullptr;
  return state_->allocate(bytes, stream);
}

void pool_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  state_->deallocate(ptr, bytes, stream);
}

}  // namespace gpumem
