// spill_registry (see spill_registry.hpp), the moving half: its streams, the pinned host pool and
// its blocks, the copies in pieces, and the accounting and statistics. Choosing victims and
// spilling them is in spill_registry.cpp.
//
// The host pool never gives chunks back while the manager lives (pool_options::trim_before_growth
// off): giving back pinned memory (cudaFreeHost) waits for the device and pinning it again costs
// far more than a copy, so a workload whose spilled bytes rise and fall would otherwise pay both on
// every spill. Its blocks are copy_piece bytes (host_copy.hpp), so buffers of any size reuse what
// the pool holds. Blocks are allocated and freed on the to-host stream; every copy from or to a
// block has been waited for before it is freed, so the next spill reuses it at once.
#include "counted_pinned_resource.hpp"
#include "spill_registry.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/cuda/detail/scoped_device.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

namespace gpumem::detail {

void host_copy::reset() noexcept {
  if (registry_ != nullptr) registry_->release_host(*this);
  blocks_.clear();
  bytes_ = 0;
  piece_ = 0;
  registry_.reset();
}

spill_registry::spill_registry(int device, spill_options const& options)
    : device_(device), options_(options), backend_(&backend()) {
  GPUMEM_EXPECTS(options.statistics_level >= 0 && options.statistics_level <= 2,
                 "spill_options: statistics_level " + std::to_string(options.statistics_level) +
                     " is not 0, 1 or 2");
  GPUMEM_EXPECTS(options.copy_piece > 0, "spill_options: copy_piece is 0");
  GPUMEM_EXPECTS(options.host_pool_growth <= max_allocation_bytes,
                 "spill_options: host_pool_growth " + std::to_string(options.host_pool_growth) +
                     " B is above the largest allocation (" + std::to_string(max_allocation_bytes) +
                     " B)");
  scoped_device on_device(device_);
  to_host_stream_ = backend_->create_stream(true);
  try {
    to_device_stream_ = backend_->create_stream(true);
    null_stream_done_ = backend_->create_event(false);
    pinned_ = std::make_unique<counted_pinned_resource>();
    pool_options pool;
    pool.chunk_size = std::max<std::size_t>(options.host_pool_growth, 2u << 20);
    pool.initial_size = 0;
    pool.trim_before_growth = false;  // see the file comment
    host_pool_ = std::make_unique<pool_resource>(*pinned_, pool);
    device_total_ = backend_->get_memory_info().total;
    spill_ahead_ = options.spill_ahead
                       ? *options.spill_ahead
                       : std::min<std::size_t>(std::size_t{64} << 20, device_total_ / 64);
  } catch (...) {
    if (null_stream_done_ != nullptr) backend_->destroy_event(null_stream_done_);
    if (to_device_stream_ != nullptr) backend_->destroy_stream(to_device_stream_);
    backend_->destroy_stream(to_host_stream_);
    throw;
  }
  stats_.level = options.statistics_level;
}

spill_registry::~spill_registry() {
  try {
    scoped_device on_device(device_);
    backend_->synchronize_stream(to_host_stream_);
    backend_->synchronize_stream(to_device_stream_);
    host_pool_.reset();
    pinned_.reset();
    backend_->destroy_event(null_stream_done_);
    backend_->destroy_stream(to_host_stream_);
    backend_->destroy_stream(to_device_stream_);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("spill manager: releasing its streams failed: ") + e.what());
  }
}

memory_pointer spill_registry::allocate_device(std::size_t bytes) {
  // The device's context now: a manager bound after close() serves it (and asks this registry's
  // on-demand handler, which is registered for the device).
  return get_context(device_).memory_manager().memalloc(bytes);
}

host_copy spill_registry::allocate_host(std::size_t bytes) {
  host_copy out;
  out.registry_ = shared_from_this();
  out.bytes_ = bytes;
  out.piece_ = options_.copy_piece;
  std::size_t const blocks = bytes / out.piece_ + (bytes % out.piece_ != 0 ? 1 : 0);
  out.blocks_.reserve(blocks);  // push_back below cannot throw: no block is lost
  scoped_device on_device(device_);
  for (std::size_t i = 0; i < blocks; ++i)
    out.blocks_.push_back(host_pool_->allocate(out.block_bytes(i), to_host_stream_));
  return out;  // on an exception, `out` gives back the blocks it has
}

void spill_registry::release_host(host_copy& copy) noexcept {
  for (std::size_t i = 0; i < copy.blocks_.size(); ++i)
    host_pool_->deallocate(copy.blocks_[i], copy.block_bytes(i), to_host_stream_);
}

void spill_registry::enqueue_to_host(host_copy const& dst, void const* src) {
  auto const* from = static_cast<unsigned char const*>(src);
  for (std::size_t i = 0; i < dst.blocks().size(); ++i)
    backend_->copy_async(dst.blocks()[i], from + i * dst.piece(), dst.block_bytes(i),
                         to_host_stream_);
}

void spill_registry::wait(copy_direction direction) {
  backend_->synchronize_stream(direction == copy_direction::to_host ? to_host_stream_
                                                                    : to_device_stream_);
}

double spill_registry::copy_to_device(void* dst, host_copy const& src) {
  scoped_device on_device(device_);
  auto const start = std::chrono::steady_clock::now();
  auto* to = static_cast<unsigned char*>(dst);
  // `dst` is memalloc's, on the null stream, which a non-blocking stream does not wait for (see
  // null_stream_done_). Only when the null stream has work left: a record there is a legacy-stream
  // operation, which on a GPU also waits for the earlier work of every blocking stream. (Work on
  // the block queued before it was handed out is queued before this question.) Concurrent unspills
  // may record in any order: each waits for a record made after its own block was handed out.
  if (!backend_->query_stream(nullptr)) {
    backend_->record_event(null_stream_done_, nullptr);
    backend_->stream_wait_event(to_device_stream_, null_stream_done_);
  }
  for (std::size_t i = 0; i < src.blocks().size(); ++i)
    backend_->copy_async(to + i * src.piece(), src.blocks()[i], src.block_bytes(i),
                         to_device_stream_);
  wait(copy_direction::to_device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void spill_registry::on_unspilled(std::size_t bytes, double seconds) noexcept {
  device_bytes_.fetch_add(bytes);
  host_bytes_.fetch_sub(bytes);
  if (options_.statistics_level < 1) return;
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.unspilled_bytes += bytes;
  stats_.unspill_seconds += seconds;
  ++stats_.unspill_count;
}

void spill_registry::on_exposed(std::size_t bytes, char const* file, int line) noexcept {
  if (options_.statistics_level < 2) return;
  try {
    std::string where =
        file != nullptr ? std::string(file) + ":" + std::to_string(line) : std::string("(unknown)");
    std::lock_guard<std::mutex> lock(stats_mutex_);
    auto& e = exposures_[where];
    e.where = where;
    ++e.count;
    e.bytes += bytes;
  } catch (...) {
    // Statistics never fail the access they describe.
  }
}

spill_statistics spill_registry::statistics() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  spill_statistics out = stats_;
  if (out.level >= 1) {
    out.pinned_bytes = pinned_->bytes();
    out.pool_growths = pinned_->calls();
    out.pin_seconds = pinned_->seconds();
  }
  for (auto const& entry : exposures_)
    out.exposures.push_back(entry.second);
  std::stable_sort(out.exposures.begin(), out.exposures.end(),
                   [](auto const& a, auto const& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace gpumem::detail
