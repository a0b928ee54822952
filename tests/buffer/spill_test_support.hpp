// Helpers of the spill tests: byte patterns, a use of a buffer (what refreshes its place in the
// least-recently-used order), the quiet options of a test manager, and a scope that makes one of
// the built-in memory managers the current context's.
#pragma once

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <cstddef>
#include <vector>

namespace gpumem::test {

inline std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::byte>((i * 13 + seed * 101 + 5) & 0xff);
  return out;
}

// A use of `b` inside gpumem: pinned for a moment, then the most recently used.
inline void touch(buffer const& b) {
  spill_lock lock;
  (void)b.get_ptr(access::read);
}

// No on-demand handler, statistics at `level`, a small host pool, several copy pieces per buffer.
inline spill_options quiet(int level = 0) {
  spill_options o;
  o.spill_on_demand = false;
  o.statistics_level = level;
  o.host_pool_growth = 4 * MiB;
  o.copy_piece = 1000;
  return o;
}

// The built-in memory manager `name` for the contexts made in the scope (open ones are closed).
class scoped_manager {
 public:
  explicit scoped_manager(char const* name) {
    gpumem::close();
    set_memory_manager(load_memory_manager(name));
  }
  scoped_manager(scoped_manager const&) = delete;
  scoped_manager& operator=(scoped_manager const&) = delete;
  ~scoped_manager() {
    gpumem::close();
    set_memory_manager({});
  }
};

}  // namespace gpumem::test
