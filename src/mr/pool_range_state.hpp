// An expandable pool's bookkeeping of its range (private to src/mr/pool_*.cpp; pool_range.cpp
// does the work): which part of the range is in use, which of its pages are unmapped, and the
// guard against moving memory faster than it is used. A member of pool_state, under its mutex_
// unless said otherwise.
#pragma once

#include "pool_extents.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace gpumem::detail {

struct pool_range_state {
  // Growth takes `mutex` and then the pool's mutex_ (the mapping runs with this one alone); trim,
  // under mutex_, only try-locks it (and skips the range while a growth is mapping), so the two
  // never wait for each other in opposite orders.
  std::mutex mutex;
  // The range's chunk in the pool's chunk table (null while it is empty): the part of the range in
  // use, from its base, in which the pages of `holes` are not mapped.
  pool_chunk* chunk = nullptr;
  // Whole pages of the range's chunk with nothing mapped (never at its end: the chunk ends before).
  pool_extent_set holes;
  std::size_t claimed_bytes = 0;   // free memory held out of the extents by a growth in flight
  std::size_t live_at_growth = 0;  // the most bytes live at a growth, with its request
  // held_target is multiplied by `slack`, raised each time sixteen intervals between growths that
  // moved memory spanned too few allocations; trim() resets it.
  double slack = 1.0;
  std::array<std::uint64_t, 16> moves_at{};  // allocations counted at the last moving growths
  std::size_t moves_seen = 0;                // moving growths since `slack` last changed
  std::uint64_t pages_mapped = 0;
  std::uint64_t pages_unmapped = 0;
};

}  // namespace gpumem::detail
