// spill_manager (see spill_manager.hpp): the public face of a spill_registry, its on-demand
// registration with the device's out-of-memory handlers, the statistics report, the options from
// the environment and the global manager.
#include "buffer_storage.hpp"
#include "spill_registry.hpp"

#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/out_of_memory_handlers.hpp>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <sstream>
#include <utility>

namespace gpumem {

struct spill_manager::on_demand {
  out_of_memory_registration registration;
};

spill_options spill_options::from_environment() {
  environment const env = environment_snapshot();
  spill_options out;
  out.spill_on_demand = env.spill_on_demand;
  if (env.spill_device_limit_set) out.device_limit = env.spill_device_limit;
  out.statistics_level = env.spill_stats;
  return out;
}

spill_manager::spill_manager(spill_options options)
    : options_(std::move(options)),
      registry_(std::make_shared<detail::spill_registry>(backend().current_device(), options_)) {
  if (options_.spill_on_demand) {
    on_demand_ = std::make_unique<on_demand>();
    // The handler holds the registry weakly: a call racing with the manager's destruction finds
    // it gone (or finishes with it alive), never dangling.
    std::weak_ptr<detail::spill_registry> weak = registry_;
    on_demand_->registration =
        add_out_of_memory_handler(registry_->device(), [weak](std::size_t bytes) -> std::size_t {
          auto registry = weak.lock();
          return registry == nullptr ? 0 : registry->spill_for_allocation(bytes).bytes;
        });
  }
}

spill_manager::~spill_manager() {
  // Buffers keep the registry; from now on they only come back on use (nothing spills them).
  registry_->orphan();
}

int spill_manager::device() const noexcept {
  return registry_->device();
}

buffer spill_manager::allocate(std::size_t bytes, bool copy_on_write) {
  buffer_options o;
  o.copy_on_write = copy_on_write;
  o.spill = this;
  return buffer(bytes, o);
}

buffer spill_manager::from_host(void const* data, std::size_t bytes, bool copy_on_write) {
  buffer_options o;
  o.copy_on_write = copy_on_write;
  o.spill = this;
  return buffer::from_host(data, bytes, o);
}

namespace {

// Spilled buffers' device memory is freed at once where the memory manager supports idle frees;
// where it went to the deferred queue instead, an explicit spill means to free it now (a no-op
// inside defer_cleanup()).
std::size_t released(int device, detail::spill_outcome const& outcome) {
  if (outcome.queued_frees) get_context(device).pending_deallocations().flush();
  return outcome.bytes;
}

}  // namespace

std::size_t spill_manager::spill_device_memory(std::size_t nbytes) {
  return released(device(), registry_->spill_bytes(nbytes));
}

std::size_t spill_manager::spill_to_device_limit(std::optional<std::size_t> limit) {
  if (!limit) limit = options_.device_limit;
  if (!limit) return 0;
  return released(device(), registry_->spill_to(*limit));
}

bool spill_manager::spill(buffer const& b) {
  if (b.storage_ == nullptr) return false;
  return released(device(), registry_->spill_storage(*b.storage_)) != 0;
}

void spill_manager::check_invariants() const {
  registry_->check_invariants();
}

std::size_t spill_manager::device_bytes() const noexcept {
  return registry_->device_bytes();
}
std::size_t spill_manager::host_bytes() const noexcept {
  return registry_->host_bytes();
}
std::size_t spill_manager::buffer_count() const {
  return registry_->count();
}

spill_statistics spill_manager::statistics() const {
  return registry_->statistics();
}

namespace {

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4fs", seconds);
  return text;
}

std::string bytes_text(std::size_t bytes) {
  return std::to_string(bytes) + "B";
}

std::string count_text(std::size_t n, char const* noun, char const* plural) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : plural);
}

}  // namespace

std::string to_string(spill_statistics const& s) {
  std::ostringstream out;
  out << "Spill Statistics (level=" << s.level << "):\n";
  if (s.level == 0) {
    out << " (disabled)\n";
    return out.str();
  }
  out << " Spilling (level >= 1):\n";
  if (s.spill_count == 0 && s.unspill_count == 0) out << "  None\n";
  if (s.spill_count != 0)
    out << "  gpu => cpu: " << bytes_text(s.spilled_bytes) << " in "
        << seconds_text(s.spill_seconds) << " (" << count_text(s.spill_count, "batch", "es") << ", "
        << count_text(s.spilled_buffers, "buffer", "s") << ")\n";
  if (s.unspill_count != 0)
    out << "  cpu => gpu: " << bytes_text(s.unspilled_bytes) << " in "
        << seconds_text(s.unspill_seconds) << " (" << count_text(s.unspill_count, "buffer", "s")
        << ")\n";
  if (s.synchronizations != 0)
    out << "  device synchronisations before spilling: " << s.synchronizations << " in "
        << seconds_text(s.synchronize_seconds) << "\n";
  if (s.pool_growths != 0)
    out << "  host memory pinned: " << bytes_text(s.pinned_bytes) << " in "
        << count_text(s.pool_growths, "growth", "s") << ", " << seconds_text(s.pin_seconds) << "\n";
  if (s.level >= 2) {
    out << " Exposed buffers (level >= 2):\n";
    if (s.exposures.empty()) out << "  None\n";
    for (auto const& e : s.exposures)
      out << "  " << bytes_text(e.bytes) << " in " << e.count << " exposure"
          << (e.count == 1 ? "" : "s") << " at " << e.where << "\n";
  }
  return out.str();
}

std::ostream& operator<<(std::ostream& os, spill_statistics const& statistics) {
  return os << to_string(statistics);
}

namespace {

struct global_state {
  std::mutex mutex;
  // Set once resolved with no manager: plain buffers then skip the mutex.
  std::atomic<bool> none{false};
  bool resolved = false;
  std::shared_ptr<spill_manager> manager;
};

global_state& global() {
  static auto* g = new global_state;  // never destroyed: buffers may die after main returns
  return *g;
}

}  // namespace

std::shared_ptr<spill_manager> global_spill_manager() {
  global_state& g = global();
  if (g.none.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(g.mutex);
  if (!g.resolved) {
    if (environment_snapshot().spill)
      g.manager = std::make_shared<spill_manager>(spill_options::from_environment());
    g.resolved = true;
  }
  g.none.store(g.manager == nullptr, std::memory_order_release);
  return g.manager;
}

void set_global_spill_manager(std::shared_ptr<spill_manager> manager) {
  global_state& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.manager = std::move(manager);
  g.resolved = true;
  g.none.store(g.manager == nullptr, std::memory_order_release);
}

}  // namespace gpumem
