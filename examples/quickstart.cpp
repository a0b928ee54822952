// quickstart: the memory manager of gpumem in one page.
//
//   ./quickstart                                        # the default manager
//   GPUMEM_MEMORY_MANAGER=host_only ./quickstart        # a built-in by name
//   GPUMEM_MEMORY_MANAGER=/path/to/libplugin.so ./quickstart
//   GPUMEM_DEVICE=host ./quickstart                     # no GPU needed
#include <gpumem/core/environment.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <cstdio>
#include <exception>
#include <numeric>
#include <vector>

namespace {

void print_statistics(gpumem::context& ctx, char const* when) {
  gpumem::pending_deallocations const& queue = ctx.pending_deallocations();
  std::printf("  %-22s pending %zu item(s), %s", when, queue.size(),
              gpumem::format_bytes(queue.bytes()).c_str());
  if (auto* d = dynamic_cast<gpumem::default_memory_manager*>(&ctx.memory_manager())) {
    auto const s = d->get_statistics();
    std::printf("; allocations %zu, frees %zu, in use %s, peak %s", s.allocations, s.frees,
                gpumem::format_bytes(s.bytes_in_use).c_str(),
                gpumem::format_bytes(s.peak_bytes).c_str());
  }
  std::printf("\n");
}

int run() {
  using namespace gpumem;
  std::printf("backend:        %s\n", backend().description().c_str());

  // The manager: GPUMEM_MEMORY_MANAGER if set, else the default. set_memory_manager checks the
  // interface version now; contexts created from here on use it.
  std::string const choice = environment_snapshot().memory_manager;
  set_memory_manager(load_memory_manager(choice));
  context& ctx = current_context();
  memory_manager& manager = ctx.memory_manager();
  std::printf("memory manager: %s (GPUMEM_MEMORY_MANAGER=%s)\n", manager.name().c_str(),
              choice.empty() ? "<unset>" : choice.c_str());
  std::printf("queue limits:   more than %zu items or %s pending flushes\n",
              ctx.pending_deallocations().max_count(),
              format_bytes(ctx.pending_deallocations().max_bytes()).c_str());

  // Device and pinned memory; a round trip host -> device -> pinned host.
  constexpr std::size_t count = 8;
  std::vector<int> values(count);
  std::iota(values.begin(), values.end(), 1);
  {
    memory_pointer device = manager.memalloc(count * sizeof(int));
    host_memory pinned = manager.memhostalloc(count * sizeof(int), host_alloc_flags{});
    backend().copy(device.device_pointer(), values.data(), count * sizeof(int));
    backend().copy(pinned.host_pointer(), device.device_pointer(), count * sizeof(int));
    int const* back = static_cast<int const*>(pinned.host_pointer());
    std::printf("round trip:    ");
    for (std::size_t i = 0; i < count; ++i)
      std::printf(" %d", back[i]);
    std::printf("  (%s)\n", std::equal(values.begin(), values.end(), back) ? "ok" : "MISMATCH");
    print_statistics(ctx, "while held:");
  }
  print_statistics(ctx, "after dropping both:");

  // Inside defer_cleanup nothing is freed, however many frees pile up.
  {
    cleanup_guard guard = manager.defer_cleanup();
    for (int i = 0; i < 15; ++i)
      (void)manager.memalloc(64 * KiB);
    print_statistics(ctx, "deferred (15 frees):");
  }
  print_statistics(ctx, "after the guard:");

  manager.reset();
  print_statistics(ctx, "after reset():");
  close();
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "quickstart: %s\n", e.what());
    return 1;
  }
}
