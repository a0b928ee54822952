// How the spill manager spills: the least-recently-used order over thousands of buffers, device
// memory freed at once (no deferred queue, no device synchronisation) on the managers that support
// idle frees and through the queue on the default manager, one synchronisation per batch only when
// a victim lent a pointer, spilling ahead of a request and of the device limit, the statistics of
// batches, synchronisations and pinning, pinned memory reused by buffers of growing sizes, and a
// destroyed manager that no longer spills.
#include "counted_device.hpp"
#include "scoped_backend.hpp"
#include "spill_test_support.hpp"

#include <gpumem/buffer/buffer.hpp>
#include <gpumem/buffer/spill_lock.hpp>
#include <gpumem/buffer/spill_manager.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

using test::pattern;
using test::quiet;
using test::touch;

TEST(spill_order, thousands_of_buffers_go_least_recently_used_first) {
  spill_manager m(quiet());
  constexpr std::size_t n = 3000;
  std::vector<buffer> buffers;
  for (std::size_t i = 0; i < n; ++i)
    buffers.push_back(m.allocate(256));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  for (std::size_t i : order)
    touch(buffers[i]);
  buffer& exposed = buffers[order[1]];
  (void)exposed.get_ptr(access::read);  // never a victim
  spill_lock held;
  held.hold(buffers[order[2]]);  // not while held
  m.check_invariants();
  // The first half goes one buffer per call, in the order of use.
  for (std::size_t k = 0; k < n / 2; ++k) {
    if (k == 1 || k == 2) continue;
    ASSERT_EQ(m.spill_device_memory(1), 256u) << "call " << k;
    ASSERT_TRUE(buffers[order[k]].is_spilled()) << "victim " << k << " was not the LRU buffer";
    ASSERT_FALSE(buffers[order[k + 1]].is_spilled()) << "call " << k;
  }
  m.check_invariants();
  EXPECT_FALSE(exposed.is_spilled());
  EXPECT_FALSE(buffers[order[2]].is_spilled());
  // Using a spilled buffer brings it back as the most recent; the rest keeps its order.
  touch(buffers[order[0]]);
  for (std::size_t k = n / 2; k < n; ++k) {
    ASSERT_EQ(m.spill_device_memory(1), 256u);
    ASSERT_TRUE(buffers[order[k]].is_spilled()) << "victim " << k;
  }
  EXPECT_FALSE(buffers[order[0]].is_spilled()) << "the buffer used last goes last";
  EXPECT_EQ(m.spill_device_memory(1), 256u);
  EXPECT_TRUE(buffers[order[0]].is_spilled());
  EXPECT_EQ(m.spill_device_memory(1), 0u) << "only the exposed and the held buffer are left";
  m.check_invariants();
}

TEST(spill_release, an_unspill_copies_after_the_null_streams_earlier_work_on_its_block) {
  // The unspilled buffer's block comes from memalloc, on the null stream, where it may have been
  // freed in stream order behind work that still writes it: the copy back, on the spill manager's
  // own non-blocking stream, must come after that work.
  test::scoped_manager pool("pool");
  spill_manager m(quiet(1));
  auto const data = pattern(64 * KiB, 7);
  buffer b = m.from_host(data.data(), data.size());
  ASSERT_TRUE(m.spill(b));
  memory_manager& manager = current_context().memory_manager();
  {
    memory_pointer block = manager.allocate(64 * KiB, nullptr);
    void* const p = block.device_pointer();
    backend().enqueue_host_function(
        nullptr, [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
    backend().fill_async(p, 0xAB, 64 * KiB, nullptr);  // runs after the wait above
  }  // freed in stream order on the null stream: the pool may hand it out there at once
  EXPECT_EQ(b.to_host(), data);
  backend().synchronize();
  EXPECT_EQ(b.to_host(), data);
}

TEST(spill_release, spilled_memory_is_freed_at_once_without_a_device_synchronisation) {
  test::counted_device device(64 * MiB);
  test::scoped_manager pool("pool");
  spill_manager m(quiet(1));
  pending_deallocations& queue = current_context().pending_deallocations();
  std::size_t const n = queue.max_count() + 2;  // more than a queue's worth
  std::vector<buffer> buffers;
  for (std::size_t i = 0; i < n; ++i)
    buffers.push_back(m.from_host(pattern(64 * KiB, static_cast<unsigned>(i)).data(), 64 * KiB));
  queue.flush();
  memory_manager& manager = current_context().memory_manager();
  std::size_t const in_use = manager.get_memory_statistics().bytes_in_use;
  device.reset_counts();
  for (buffer const& b : buffers)
    ASSERT_TRUE(m.spill(b));
  EXPECT_EQ(queue.size(), 0u) << "no spilled block entered the deferred queue";
  EXPECT_EQ(device.counter->device_synchronizations, 0)
      << "nothing was lent, and no flush synchronised the device";
  EXPECT_EQ(manager.get_memory_statistics().bytes_in_use, in_use - n * 64 * KiB)
      << "the device memory went back at once";

  // Lent pointers: the batch synchronises once, however many victims lent.
  {
    spill_lock lock;
    for (buffer const& b : buffers)
      (void)b.get_ptr(access::read);
  }
  device.reset_counts();
  EXPECT_EQ(m.spill_device_memory(~std::size_t{0}), n * 64 * KiB);
  EXPECT_EQ(device.counter->device_synchronizations, 1);
  spill_statistics const s = m.statistics();
  EXPECT_EQ(s.synchronizations, 1u);
  EXPECT_EQ(s.spill_count, n + 1) << "n single spills and one batch";
  EXPECT_EQ(s.spilled_buffers, 2 * n);
  EXPECT_EQ(s.unspill_count, n);
  EXPECT_GE(s.pinned_bytes, 64 * KiB);
  EXPECT_GE(s.pool_growths, 1u);
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_EQ(buffers[i].to_host(), pattern(64 * KiB, static_cast<unsigned>(i)));
}

TEST(spill_release, spilling_while_another_thread_unspills_never_waits_for_the_device) {
  // bench_spill's "both at once": one thread spills one group with spill(b) while another brings
  // the other group back. A device-wide synchronisation would wait for the other direction.
  test::counted_device device(256 * MiB);
  test::scoped_manager pool("pool");
  spill_manager m(quiet(1));
  std::vector<buffer> out, in;
  for (unsigned i = 0; i < 24; ++i) {
    out.push_back(m.from_host(pattern(96 * KiB, i).data(), 96 * KiB));
    in.push_back(m.from_host(pattern(80 * KiB, 100 + i).data(), 80 * KiB));
  }
  for (buffer const& b : in)
    ASSERT_TRUE(m.spill(b));
  device.reset_counts();
  std::thread spiller([&] {
    for (buffer const& b : out)
      EXPECT_TRUE(m.spill(b));
  });
  std::thread unspiller([&] {
    for (buffer const& b : in) {
      spill_lock lock;
      lock.hold(b);
    }
  });
  spiller.join();
  unspiller.join();
  EXPECT_EQ(device.counter->device_synchronizations, 0);
  EXPECT_EQ(current_context().pending_deallocations().size(), 0u);
  for (unsigned i = 0; i < 24; ++i) {
    EXPECT_TRUE(out[i].is_spilled());
    EXPECT_FALSE(in[i].is_spilled());
    EXPECT_EQ(out[i].to_host(), pattern(96 * KiB, i));
    EXPECT_EQ(in[i].to_host(), pattern(80 * KiB, 100 + i));
  }
}

TEST(spill_release, the_default_manager_frees_through_its_queue_which_a_spill_call_flushes) {
  test::counted_device device(64 * MiB);
  test::scoped_manager plain("default");
  spill_manager m(quiet());
  buffer a = m.from_host(pattern(8 * KiB, 1).data(), 8 * KiB);
  pending_deallocations& queue = current_context().pending_deallocations();
  queue.flush();
  std::size_t const in_use =
      current_context().memory_manager().get_memory_statistics().bytes_in_use;
  ASSERT_TRUE(m.spill(a));
  EXPECT_EQ(queue.size(), 0u) << "the queued free was flushed by the call";
  EXPECT_EQ(current_context().memory_manager().get_memory_statistics().bytes_in_use,
            in_use - 8 * KiB);
  EXPECT_EQ(a.to_host(), pattern(8 * KiB, 1));
}

TEST(spill_ahead, on_demand_spills_at_least_spill_ahead) {
  test::scoped_backend device(16 * MiB);
  spill_options o = quiet(1);
  o.spill_on_demand = true;
  o.spill_ahead = 6 * MiB;
  spill_manager m(o);
  std::vector<buffer> filler;
  for (int i = 0; i < 12; ++i)
    filler.push_back(m.allocate(MiB));
  buffer plain(5 * MiB);  // about 1 MiB short: 6 buffers go
  EXPECT_EQ(m.host_bytes(), 6 * MiB);
  for (std::size_t i = 0; i < filler.size(); ++i)
    EXPECT_EQ(filler[i].is_spilled(), i < 6) << i;
  EXPECT_EQ(m.statistics().spill_count, 1u);
}

TEST(spill_ahead, the_device_limit_is_kept_with_spill_ahead_to_spare_at_most_an_eighth) {
  // A limit of 24 MiB: an eighth is 3 MiB, so 64 MiB ahead spills as 3 MiB does.
  for (std::size_t ahead : {std::size_t{0}, 3 * MiB, 64 * MiB}) {
    spill_options o = quiet(1);
    o.device_limit = 24 * MiB;
    o.spill_ahead = ahead;
    spill_manager m(o);
    std::vector<buffer> buffers;
    for (int i = 0; i < 26; ++i)
      buffers.push_back(m.allocate(MiB));
    if (ahead == 0) {
      EXPECT_EQ(m.device_bytes(), 24 * MiB);
      EXPECT_EQ(m.statistics().spill_count, 2u) << "one batch per buffer over the limit";
    } else {
      EXPECT_EQ(m.device_bytes(), 23 * MiB) << "3 MiB went at the 25th buffer, none at the 26th";
      EXPECT_EQ(m.statistics().spill_count, 1u);
    }
    EXPECT_TRUE(buffers[0].is_spilled());
    EXPECT_FALSE(buffers[25].is_spilled());
  }
}

TEST(spill_host_memory, buffers_of_growing_sizes_reuse_what_is_pinned) {
  // One buffer spilled at a time, each larger than the last: held in copy_piece blocks, each reuses
  // the blocks of the one before, so the pool pins about the largest, not the sum of them all.
  spill_options o = quiet(1);
  o.host_pool_growth = 4 * MiB;
  o.copy_piece = 64 * KiB;
  spill_manager m(o);
  std::size_t total = 0;
  for (std::size_t mib : {3, 5, 7, 9, 11}) {
    buffer b = m.from_host(pattern(mib * MiB, static_cast<unsigned>(mib)).data(), mib * MiB);
    ASSERT_TRUE(m.spill(b));
    EXPECT_EQ(b.to_host(), pattern(mib * MiB, static_cast<unsigned>(mib)));
    total += mib * MiB;
  }
  spill_statistics const s = m.statistics();
  EXPECT_GE(s.pinned_bytes, 11 * MiB);
  EXPECT_LE(s.pinned_bytes, 16 * MiB)
      << "pinned for each size anew (" << total << " bytes spilled)";
}

TEST(spill_lifetime, a_destroyed_manager_no_longer_spills_to_its_limit) {
  spill_options o = quiet();
  o.device_limit = 0;
  std::optional<spill_manager> m(std::in_place, o);
  buffer a = m->from_host(pattern(3000, 2).data(), 3000);
  ASSERT_TRUE(a.is_spilled());
  m.reset();
  {
    spill_lock lock;
    lock.hold(a);  // unspilled for the scope
  }
  EXPECT_FALSE(a.is_spilled()) << "no manager: the limit is not enforced any more";
  buffer copy = a.copy();
  EXPECT_FALSE(copy.is_spilled());
  EXPECT_EQ(copy.to_host(), pattern(3000, 2));
  EXPECT_EQ(a.to_host(), pattern(3000, 2));
}

}  // namespace
}  // namespace gpumem
