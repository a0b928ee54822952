// gpumem/buffer/spill_manager.hpp
//
// spill_manager: moves device buffers to pinned host memory when device memory is short, and back
// when they are used — cuDF's spilling, for gpumem buffers.
//
//   gpumem::spill_manager spill({/*spill_on_demand=*/true, /*device_limit=*/4 * GiB});
//   gpumem::buffer b(256 * MiB, gpumem::buffer_options{gpumem::buffer_memory::device, false,
//                                                      &spill});   // a spillable buffer
//   spill.spill_device_memory(1);              // spills the least recently used whole buffer
//   { gpumem::spill_lock lock;                 // inside gpumem: pointers held, not exposed
//     launch(..., b.get_ptr(gpumem::access::read)); }   // unspilled first, kept on the device
//   std::cout << spill.statistics();           // "Spill Statistics (level=1): ..."
//
// A spillable buffer is a device buffer made with this manager (buffer_options::spill) or, when a
// global manager is set (GPUMEM_SPILL=on), any device buffer made on its device. Spilling moves a
// whole storage (all slices of it) to blocks of the manager's pinned host pool and releases the
// device memory; get_ptr brings it back. Handles keep their identity: slices compute their address
// from the storage, so it is fresh after an unspill. Victims are least recently used first (a use,
// such as a pointer inside a spill lock or a transfer, refreshes a buffer when it ends); exposed
// buffers, buffers held by a spill_lock and views of foreign memory are never spilled.
//
// Spill on demand (options): the manager registers an out-of-memory handler for its device
// (manager/out_of_memory_handlers.hpp), so an allocation on that device that runs out spills at
// least the bytes it asked for and retries once. It stays registered across set_memory_manager and
// close(), and is removed when the spill_manager is destroyed. Device limit (options): a soft limit
// on the bytes of this manager's buffers on the device, enforced (by spilling) when a buffer is
// made or unspilled and when a spill lock ends; unspillable buffers may keep the use above it.
// Automatic spills move at least options.spill_ahead bytes when they can.
//
// Copies: spills on one stream, unspills on another, so spilling and unspilling at once use both
// copy directions; copies go in pieces (options.copy_piece) so a large buffer does not hold a copy
// engine alone. A batch of victims synchronises the device once when one of them lent a pointer
// inside a spill lock (work may still use it), waits for its own copies, and frees the device
// memory at once (memory_pointer::release_idle) where the memory manager supports it.
//
// Ownership: buffers share the manager's state (registry, streams, host pool), so they stay valid
// after it is destroyed, and spilled ones still come back on use; destroying it stops spilling
// (on demand and to the device limit). Thread safety: every member may be called from any thread;
// spilling, unspilling and access of buffers on several threads at once are safe. Errors:
// out_of_memory from unspilling or from the host pool; a bad environment value is a logic_error
// naming the variable.
#pragma once

#include <gpumem/buffer/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {

namespace detail {
class spill_registry;
}  // namespace detail

// Creation-time settings of a spill_manager.
struct spill_options {
  // Register an out-of-memory handler for the device that spills on demand.
  bool spill_on_demand = true;
  // Soft limit on this manager's device bytes (none by default).
  std::optional<std::size_t> device_limit;
  // 0: no statistics; 1: bytes and time of spilling and unspilling; 2: also every exposure,
  // grouped by the source location of the get_ptr that exposed (records a string per exposure).
  int statistics_level = 0;
  // The pinned host pool takes pinned memory in chunks of this size (a young pool in smaller
  // steps) and gives none back while the manager lives.
  std::size_t host_pool_growth = std::size_t{256} << 20;
  // Copies larger than this go in pieces of this size, and a spilled buffer's bytes are held in
  // host blocks of this size (the last one shorter), so buffers of any size share the pool.
  std::size_t copy_piece = std::size_t{8} << 20;
  // Automatic spills move at least this many bytes when that many can go (to the device limit:
  // at most an eighth of the limit), so that the allocations that follow find room without
  // spilling again (each automatic spill costs a failed allocation or a batch of its own).
  // 0: exactly what is needed. Default: 1/64 of the device's memory, at most 64 MiB.
  std::optional<std::size_t> spill_ahead;

  // GPUMEM_SPILL_ON_DEMAND (default on), GPUMEM_SPILL_DEVICE_LIMIT (bytes; default none),
  // GPUMEM_SPILL_STATS (0, 1, 2). Throws logic_error naming a variable with a bad value.
  static spill_options from_environment();
};

// Spilling statistics (see spill_options::statistics_level).
struct spill_statistics {
  struct exposure {
    std::string where;  // "file:line" of the get_ptr
    std::size_t count = 0;
    std::size_t bytes = 0;
  };
  int level = 0;
  // gpu => cpu. The seconds are those of the copies (from the first enqueued to the end of the
  // wait); synchronisations and pinning below are not in them.
  std::size_t spilled_bytes = 0;
  double spill_seconds = 0;
  std::size_t spill_count = 0;      // batches (calls that spilled something)
  std::size_t spilled_buffers = 0;  // storages spilled
  // cpu => gpu: the copies' seconds (not the device allocation); one count per storage.
  std::size_t unspilled_bytes = 0;
  double unspill_seconds = 0;
  std::size_t unspill_count = 0;
  // Device-wide synchronisations made before spilling buffers whose pointers were lent inside a
  // spill lock (work may still use them), and the seconds they waited.
  std::size_t synchronizations = 0;
  double synchronize_seconds = 0;
  // Pinned host memory the host pool took (each growth pins), and the seconds pinning took.
  std::size_t pinned_bytes = 0;
  std::size_t pool_growths = 0;
  double pin_seconds = 0;
  std::vector<exposure> exposures;  // level 2, most bytes first
};
// The report: "Spill Statistics (level=N):" and, by level, the spilling totals
// ("gpu => cpu: <bytes> in <seconds>s (<batches> batches, <buffers> buffers)"), the
// synchronisations and the pinning, and the exposures by where they happened.
std::string to_string(spill_statistics const& statistics);
std::ostream& operator<<(std::ostream& os, spill_statistics const& statistics);

class spill_manager {
 public:
  // A manager for the current device.
  explicit spill_manager(spill_options options = {});
  spill_manager(spill_manager const&) = delete;
  spill_manager& operator=(spill_manager const&) = delete;
  // Unregisters spill on demand and stops spilling to the device limit. Buffers made with it
  // stay valid; spilled ones unspill on use.
  ~spill_manager();

  int device() const noexcept;
  spill_options const& options() const noexcept { return options_; }

  // A spillable device buffer of `bytes` (uninitialised) / with a copy of host bytes.
  buffer allocate(std::size_t bytes, bool copy_on_write = false);
  buffer from_host(void const* data, std::size_t bytes, bool copy_on_write = false);

  // Spills least recently used whole buffers until at least `nbytes` are spilled or nothing
  // spillable is left; returns the bytes spilled. Buffers another thread is using are skipped.
  std::size_t spill_device_memory(std::size_t nbytes);
  // Spills until this manager's device bytes are at most `limit` (default: the configured device
  // limit; nothing without one); returns the bytes spilled.
  std::size_t spill_to_device_limit(std::optional<std::size_t> limit = std::nullopt);
  // Spills the storage of `b` (and so every slice of it). False when it is not this manager's, is
  // already spilled, exposed, or held by a spill lock.
  bool spill(buffer const& b);

  // This manager's live buffers: their bytes on the device and in host memory, and how many.
  std::size_t device_bytes() const noexcept;
  std::size_t host_bytes() const noexcept;
  std::size_t buffer_count() const;

  spill_statistics statistics() const;
  // Throws logic_error when the manager's internal order of spill candidates is inconsistent (a
  // listed buffer that is pinned, spilled or exposed, broken links, counts that disagree). For
  // tests and model-based stress tests.
  void check_invariants() const;

  // For buffer and the tests: the shared state.
  std::shared_ptr<detail::spill_registry> const& registry() const noexcept { return registry_; }

 private:
  spill_options options_;
  std::shared_ptr<detail::spill_registry> registry_;
  struct on_demand;
  std::unique_ptr<on_demand> on_demand_;
};

// The process-wide spill manager device buffers use by default: made on first call, for the
// current device, when GPUMEM_SPILL is on (with spill_options::from_environment()); null when off.
std::shared_ptr<spill_manager> global_spill_manager();
// Replaces the global spill manager (null: none, whatever the environment says).
void set_global_spill_manager(std::shared_ptr<spill_manager> manager);

}  // namespace gpumem
