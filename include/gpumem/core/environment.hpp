// gpumem/core/environment.hpp
//
// The one table of environment variables gpumem reads (see src/core/environment.cpp for the table:
// name, default, unit, valid values, description). Nothing else in gpumem calls getenv.
//
// Values are parsed once, on first use, into an `environment` snapshot. An invalid value is an
// error (gpumem::logic_error) whose message names the variable, the value and the valid values.
// Thread safety: `environment_snapshot()` may be called from any thread; `reload_environment()` is
// for tests and embedders that change variables at run time, and must not race with itself.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gpumem {

struct environment {
  // GPUMEM_DEVICE: "cuda", "host", or "" (auto: cuda when a GPU is present, else host).
  std::string device;
  // GPUMEM_MEMORY_MANAGER: a built-in manager's name (default, pool, async, host_only) or a path to
  // a shared library exporting gpumem_memory_manager_factory. "" means "default".
  std::string memory_manager;
  // NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT: the deferred-deallocation queue is flushed when it holds
  // more than this many items.
  std::size_t max_pending_deallocs_count = 10;
  // NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO: ... or more than this fraction of device memory in
  // bytes.
  double max_pending_deallocs_ratio = 0.2;
  // GPUMEM_HOST_DEVICE_CAPACITY: memory of the simulated device of the host backend.
  std::size_t host_device_capacity = std::size_t{4} << 30;
  // GPUMEM_DEBUG_MEMORY: wrap every memory manager's resource in the debug (tracking) adaptor.
  bool debug_memory = false;
  // GPUMEM_DEVICE_HEAP_SIZE: bytes of the device heap the runtime (nrt/) allocates from.
  std::size_t device_heap_size = std::size_t{256} << 20;
  // GPUMEM_STRING_HEAP_FACTOR: strings::transform sizes the heap it makes as this many bytes per
  // byte of input characters ...
  double string_heap_factor = 3.0;
  // GPUMEM_STRING_HEAP_BYTES_PER_ROW: ... plus this many bytes per row.
  std::size_t string_heap_bytes_per_row = 128;
  // GPUMEM_LOG_LEVEL: trace, debug, info, warn, error, off.
  std::string log_level = "warn";
  // GPUMEM_SPILL: a global spill manager makes device buffers spillable (buffer/spill_manager.hpp).
  bool spill = false;
  // GPUMEM_SPILL_ON_DEMAND: the spill manager spills when an allocation runs out (default: on).
  bool spill_on_demand = true;
  // GPUMEM_SPILL_DEVICE_LIMIT: a soft limit on spillable device bytes; 0 (or unset) means none
  // unless spill_device_limit_set.
  std::size_t spill_device_limit = 0;
  bool spill_device_limit_set = false;
  // GPUMEM_SPILL_STATS: statistics level 0, 1 or 2.
  int spill_stats = 0;
  // GPUMEM_POOL_MAX_CACHED_SIZE: pool_options::max_cached_size of the pool memory manager made by
  // name (GPUMEM_MEMORY_MANAGER=pool); at most 4 GiB. The default is pool_options' own.
  std::size_t pool_max_cached_size = std::size_t{256} << 10;
};

// One row of the table, for documentation and `gpumem::environment_table()`.
struct environment_variable {
  char const* name;
  char const* default_value;
  char const* unit;  // "", "bytes", "count", "ratio", "flag", "name"
  char const* valid_values;
  char const* description;
};

// The parsed snapshot (parsed on first call; throws gpumem::logic_error on an invalid value).
environment environment_snapshot();

// Re-reads every variable (tests; embedders that set variables before creating contexts).
void reload_environment();

// The table itself.
std::vector<environment_variable> const& environment_table();

}  // namespace gpumem
