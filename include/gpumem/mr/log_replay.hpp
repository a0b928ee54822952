// gpumem/mr/log_replay.hpp
//
// Reads allocation logs in RMM's CSV format (the one logging_adaptor writes) and replays them
// against any resource: to compare allocators on a real program's trace, and to measure
// fragmentation (peak bytes the allocator held / peak bytes live).
//
// Format: a header line naming the columns, then one event per line. The columns Action, Pointer
// and Size are required; Thread, Time and Stream are used when present; other columns are ignored,
// in any order. Action is "allocate", "free" (also "deallocate") or "allocate failure". Pointer
// and Stream are hexadecimal ("0x7f..."; "0x0", "0", "(nil)" or empty for null). Time is seconds
// ("1718031123.512345") or a time of day ("15:41:27.093342"). Blank lines are skipped; a line
// that cannot be read is a gpumem::logic_error naming its line number.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace gpumem {

enum class log_action { allocate, free, allocate_failure };

char const* to_string(log_action action) noexcept;

struct log_event {
  std::uint64_t thread = 0;   // the logged thread id (a hash of it when not numeric)
  double time_seconds = 0.0;  // as logged; 0 when the log has no Time column
  log_action action = log_action::allocate;
  std::uintptr_t pointer = 0;  // as logged (an address in the logging process)
  std::size_t size = 0;
  std::uintptr_t stream = 0;  // as logged; 0 is the default stream
  std::size_t line = 0;       // line number in the log, for messages
};

std::vector<log_event> parse_log(std::istream& in);
// Throws gpumem::logic_error naming the path when the file cannot be opened.
std::vector<log_event> parse_log_file(std::string const& path);

struct replay_options {
  // Replay each logged stream on its own stream (created for the replay on the resource's backend,
  // memory_resource::backend_in_use, destroyed after); otherwise every event runs on the default
  // stream.
  bool honour_streams = true;
  // Streams to replay on instead of creating them: the n-th distinct logged non-default stream runs
  // on streams[n % size]. The caller owns them; use this when the resource keeps per-stream state
  // that must not outlive the replay's own streams (they are destroyed when replay returns).
  std::vector<stream_handle> streams;
  // Replay each logged thread's events on a thread of its own (one per distinct Thread value,
  // started for the replay and joined before it returns), still one event after another in log
  // order: a resource with per-thread state (the pool's thread caches) then sees a program's
  // threads as they were, such as PyTorch's autograd thread freeing in the backward pass what the
  // main thread allocated. Each thread times its runs of events: the hand-overs between threads
  // are not part of replay_result::seconds. A log of one thread runs on the calling thread either
  // way.
  bool honour_threads = false;
  // Called after every allocation and free: the bytes the resource holds from its upstream (e.g.
  // a statistics_adaptor under a pool: [&] { return stats.bytes().current; }). Gives
  // peak_held_bytes and fragmentation.
  std::function<std::size_t()> held_bytes;
  // Stop at the first out_of_memory and rethrow it (after freeing what is live, if
  // free_leftovers) instead of counting it and skipping the allocation's free.
  bool stop_on_out_of_memory = false;
  // Synchronize every stream used and free what the log left live when the replay ends, and what
  // is live when it stops on an exception (the out-of-memory above, or anything else the resource
  // or held_bytes throws, which replay rethrows after).
  bool free_leftovers = true;
};

struct replay_result {
  std::size_t events = 0;
  std::size_t allocations = 0;
  std::size_t frees = 0;
  std::size_t logged_failures = 0;  // "allocate failure" lines (not replayed)
  // Frees of pointers the replay never allocated (skipped), and blocks the replay freed itself
  // because the log allocated their pointer again without a free.
  std::size_t unmatched_frees = 0;
  std::size_t out_of_memory = 0;         // allocations that failed during the replay
  std::size_t leftover_allocations = 0;  // live at the end of the log
  std::size_t peak_live_bytes = 0;       // highest sum of live requested sizes
  std::size_t peak_held_bytes = 0;       // highest held_bytes() seen (0 without the probe)
  // Time of the replay loop: the resource's allocations and frees. The log is first turned into
  // steps over slots (untimed; streams are created then), so that the loop looks nothing up.
  double seconds = 0.0;
  // peak_held_bytes / peak_live_bytes; 0 when either is unknown.
  double fragmentation() const noexcept {
    return peak_live_bytes == 0 || peak_held_bytes == 0
               ? 0.0
               : static_cast<double>(peak_held_bytes) / static_cast<double>(peak_live_bytes);
  }
};

// Replays `events` in order (on the calling thread, or on one thread per logged thread with
// honour_threads), mapping logged pointers to the new ones (a logged pointer reused after its free
// maps afresh). Events are not timed: the replay runs as
// fast as the resource allows.
replay_result replay(std::vector<log_event> const& events, memory_resource& resource,
                     replay_options const& options = {});

}  // namespace gpumem
