// The host side of an NRT memory system: its device state, statistics and error words.
#include <gpumem/core/error.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/nrt/memsys.hpp>

#include <atomic>
#include <sstream>
#include <vector>

namespace gpumem::nrt {

namespace detail {
memsys_state*& host_current_memsys() noexcept {
  thread_local memsys_state* current = nullptr;
  return current;
}
}  // namespace detail

namespace {
constexpr std::uint32_t default_stat_shards = 64;

std::uint64_t next_memsys_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

memsys::memsys(heap_options heap, memsys_options options)
    : heap_(std::make_unique<device_heap>(heap)),
      stat_shards_(default_stat_shards),
      statistics_enabled_(options.statistics),
      id_(next_memsys_id()) {
  std::size_t const stats_offset = 256;  // the state itself first, then the shards
  static_assert(sizeof(detail::memsys_state) <= stats_offset, "memsys_state grew");
  std::size_t const stats_bytes = std::size_t{stat_shards_} * detail::stat_count * 8;
  memory_ = current_context().memory_manager().memalloc(stats_offset + stats_bytes);
  auto* const base = static_cast<char*>(memory_.device_pointer());
  state_ = reinterpret_cast<detail::memsys_state*>(base);
  detail::memsys_state initial{};
  initial.heap = heap_->handle();
  initial.stats = reinterpret_cast<unsigned long long*>(base + stats_offset);
  initial.stat_shards = stat_shards_;
  initial.statistics_enabled = options.statistics ? 1u : 0u;
  backend().fill(base + stats_offset, 0, stats_bytes);
  backend().copy(state_, &initial, sizeof(initial));
}

memsys::~memsys() = default;

void memsys::enable_statistics() {
  backend().synchronize();
  std::uint32_t const on = 1;
  backend().copy(&state_->statistics_enabled, &on, sizeof(on));
  statistics_enabled_ = true;
}

void memsys::disable_statistics() {
  backend().synchronize();
  std::uint32_t const off = 0;
  backend().copy(&state_->statistics_enabled, &off, sizeof(off));
  statistics_enabled_ = false;
}

memsys_statistics memsys::statistics() {
  GPUMEM_EXPECTS(statistics_enabled_,
                 "nrt::memsys statistics are disabled: enable_statistics() (or "
                 "memsys_options::statistics) before reading them");
  backend().synchronize();
  std::vector<unsigned long long> shards(std::size_t{stat_shards_} * detail::stat_count);
  unsigned long long* stats = nullptr;
  backend().copy(&stats, &state_->stats, sizeof(stats));
  backend().copy(shards.data(), stats, shards.size() * 8);
  memsys_statistics s;
  for (std::size_t i = 0; i < stat_shards_; ++i) {
    s.alloc += shards[i * detail::stat_count + detail::stat_alloc];
    s.free += shards[i * detail::stat_count + detail::stat_free];
    s.mi_alloc += shards[i * detail::stat_count + detail::stat_mi_alloc];
    s.mi_free += shards[i * detail::stat_count + detail::stat_mi_free];
  }
  return s;
}

void memsys::reset_statistics() {
  backend().synchronize();
  unsigned long long* stats = nullptr;
  backend().copy(&stats, &state_->stats, sizeof(stats));
  backend().fill(stats, 0, std::size_t{stat_shards_} * detail::stat_count * 8);
}

void memsys::check() {
  backend().synchronize();
  unsigned long long errors = 0, first = 0;
  backend().copy(&errors, &state_->refcount_errors, sizeof(errors));
  if (errors != 0) {
    backend().copy(&first, &state_->first_bad_meminfo, sizeof(first));
    unsigned long long const zero = 0;
    backend().copy(&state_->refcount_errors, &zero, sizeof(zero));
    backend().copy(&state_->first_bad_meminfo, &zero, sizeof(zero));
    std::ostringstream out;
    out << "nrt: " << errors << " reference count operation(s) found a count of zero (decref of a "
        << "dead object, or incref of a dying one); first meminfo 0x" << std::hex << first;
    throw logic_error(out.str());
  }
  heap_->check();
}

}  // namespace gpumem::nrt
