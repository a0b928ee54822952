// pool_resource's idle takes: a stream short of memory takes a block from the extents of another
// stream that the calling thread may ask about (its own per-thread default stream) only while that
// stream is idle on the device, never a block freed after the pool asked, never from or for a
// stream being captured, nor from another thread's per-thread default stream or a created stream
// other than the caller's (it may have been destroyed without release_stream): those fence what
// they freed in their own next call, and a later miss takes it once the fence has completed. Only
// the block moves (a cached size brings a slab).
#include <gpumem/core/units.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include "forwarding_backend.hpp"
#include "pool_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <future>
#include <thread>
#include <utility>

namespace gpumem {
namespace {

using test::pool_test;

// Pools whose blocks all take the large path, over one chunk of 64 MiB to begin with.
pool_options large_path_pool() {
  pool_options options;
  options.initial_size = 64 * MiB;
  options.chunk_size = 64 * MiB;
  options.max_cached_size = 256 * KiB;
  return options;
}

bool overlap(void* p, void* q, std::size_t bytes) {
  auto const x = reinterpret_cast<std::uintptr_t>(p);
  auto const y = reinterpret_cast<std::uintptr_t>(q);
  return x < y + bytes && y < x + bytes;
}

TEST_F(pool_test, a_miss_takes_one_block_from_a_stream_idle_on_the_device) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  pool_resource pool(upstream, large_path_pool());
  // The calling thread's per-thread default stream: a stream it may ask about.
  stream_handle const own = backend().per_thread_default_stream();
  // It frees 48 MiB into its own extents; the pool's free extents keep the other 16.
  void* on_b = pool.allocate(48 * MiB, own);
  pool.deallocate(on_b, 48 * MiB, own);
  std::size_t const owned = pool.statistics().stream_bytes;
  ASSERT_GE(owned, 48 * MiB);
  {
    // It has work in flight: its memory stays its own, and a grows the pool for 32 MiB.
    test::closed_gate busy(own);
    void* grown = pool.allocate(32 * MiB, a);
    pool_statistics const st = pool.statistics();
    EXPECT_EQ(st.idle_takes, 0u);
    EXPECT_EQ(st.upstream_allocations, 2u);
    EXPECT_EQ(st.stream_bytes, owned);
    busy.open();
    backend().synchronize_stream(own);
    pool.deallocate(grown, 32 * MiB, a);
    backend().synchronize_stream(a);
  }
  // Now it is idle: a miss of 40 MiB on a (whose own extents and the free ones are too small)
  // takes that block, and only that, from its extents, without growing.
  std::size_t const b_before = pool.statistics().stream_bytes;
  void* from_b = pool.allocate(40 * MiB, a);
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.idle_takes, 1u);
  EXPECT_EQ(st.upstream_allocations, 2u);
  EXPECT_EQ(st.reclaims, 0u);
  EXPECT_EQ(st.stream_bytes, b_before - 40 * MiB) << "more than the block left its extents";
  pool.check_invariants();
  pool.deallocate(from_b, 40 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, a_quiet_created_streams_memory_goes_to_another_once_its_own_next_call_fenced_it) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  pool_resource pool(upstream, large_path_pool());
  void* on_b = pool.allocate(64 * MiB, b);  // the whole first chunk
  pool.deallocate(on_b, 64 * MiB, b);       // b's own extents, under no fence yet
  backend().synchronize_stream(b);
  // a may not ask about b (only a call made on b may use its handle): a grows.
  void* grown = pool.allocate(40 * MiB, a);
  pool_statistics st = pool.statistics();
  EXPECT_EQ(st.idle_takes, 0u);
  EXPECT_EQ(st.upstream_allocations, 2u);
  EXPECT_EQ(st.device_queries, 0u) << "a asked about b";
  // b has not allocated since that growth (quiet) and parks half of the pool: a's next miss
  // reclaims its memory, asking b to fence it, and grows once more.
  void* more = pool.allocate(40 * MiB, a);
  st = pool.statistics();
  EXPECT_EQ(st.reclaims, 1u);
  EXPECT_EQ(st.upstream_allocations, 3u);
  std::uint64_t const events = st.events_recorded;
  // b's next call records the fence (a free), and once it has completed a's next miss takes b's
  // memory without growing.
  pool.deallocate(pool.allocate(1 * MiB, b), 1 * MiB, b);
  EXPECT_EQ(pool.statistics().events_recorded, events + 1);
  backend().synchronize_stream(b);
  void* from_b = pool.allocate(40 * MiB, a);
  st = pool.statistics();
  EXPECT_EQ(st.upstream_allocations, 3u);
  EXPECT_TRUE(overlap(from_b, on_b, 64 * MiB)) << "a did not get b's memory";
  pool.check_invariants();
  for (void* p : {from_b, more, grown})
    pool.deallocate(p, 40 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, with_query_other_streams_a_miss_takes_from_an_idle_created_stream) {
  // The caller promises release_stream before every destroy: the pool may ask b about its work
  // from a call made on a, and b's idle memory serves a's miss at once.
  pool_options options = large_path_pool();
  options.query_other_streams = true;
  pool_resource pool(upstream, options);
  void* on_b = pool.allocate(48 * MiB, b);
  pool.deallocate(on_b, 48 * MiB, b);
  backend().synchronize_stream(b);
  void* from_b = pool.allocate(40 * MiB, a);
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.idle_takes, 1u);
  EXPECT_EQ(st.upstream_allocations, 1u);
  EXPECT_TRUE(overlap(from_b, on_b, 40 * MiB));
  pool.deallocate(from_b, 40 * MiB, a);
  pool.check_invariants();
}

// What a test changes in the backend the pool sees: `after_query` runs (once) right after the
// pool asks whether `watched` is idle, and `capturing` is said to be captured into a graph (on
// either backend, without a real capture).
class watching_backend final : public test::forwarding_backend {
 public:
  using forwarding_backend::forwarding_backend;
  stream_handle watched = nullptr;
  std::function<void()> after_query;
  stream_handle capturing = nullptr;
  bool query_stream(stream_handle stream) override {
    bool const idle = inner_.query_stream(stream);
    if (stream == watched && after_query) std::exchange(after_query, nullptr)();
    return idle;
  }
  bool stream_is_capturing(stream_handle stream) override {
    return (capturing != nullptr && stream == capturing) || inner_.stream_is_capturing(stream);
  }
};

TEST_F(pool_test, a_block_freed_after_the_idle_query_is_not_taken) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  // Between the pool's question (b is idle) and its look at b's extents, a thread queues work on
  // block x on b and frees x: the answer does not cover that work, so x must not go to a.
  watching_backend hook(backend());
  pool_options options = large_path_pool();
  options.initial_size = 96 * MiB;
  options.chunk_size = 96 * MiB;
  options.fence_bytes = 1 * GiB;  // no fence on b's free inside the hook (it holds the mutex)
  options.backend = &hook;
  pool_resource pool(upstream, options);
  void* x = pool.allocate(40 * MiB, b);
  void* p = pool.allocate(44 * MiB, b);
  pool.deallocate(p, 44 * MiB, b);  // b's extents: 44 MiB, next to x
  backend().synchronize_stream(b);
  test::stream_gate busy;
  hook.watched = b;
  hook.after_query = [&] {
    busy.block(b);  // b's work on x, still to run
    pool.deallocate(x, 40 * MiB, b);
  };
  void* on_a = pool.allocate(40 * MiB, a);
  EXPECT_FALSE(overlap(on_a, x, 40 * MiB)) << "a got x while b's work on it is pending";
  busy.open();
  backend().synchronize_stream(b);
  pool.deallocate(on_a, 40 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, no_block_is_taken_from_or_for_a_stream_being_captured) {
  // A capturing stream may not be queried, and a capture's blocks follow the capture's rules.
  for (bool capture_owner : {true, false}) {
    watching_backend marking(backend());
    pool_options options = large_path_pool();
    options.backend = &marking;
    pool_resource pool(upstream, options);
    void* on_b = pool.allocate(48 * MiB, b);
    pool.deallocate(on_b, 48 * MiB, b);
    backend().synchronize_stream(b);
    marking.capturing = capture_owner ? b : a;
    void* on_a = pool.allocate(40 * MiB, a);
    marking.capturing = nullptr;
    EXPECT_EQ(pool.statistics().idle_takes, 0u) << (capture_owner ? "owner" : "taker");
    pool.deallocate(on_a, 40 * MiB, a);
    pool.check_invariants();
  }
}

TEST_F(pool_test, no_block_is_taken_from_another_threads_per_thread_stream) {
  // The per-thread default stream's handle names the calling thread's own stream: asked from
  // another thread, it would describe the wrong stream. What a live thread freed there stays its
  // own until its fences say otherwise, whatever that stream's state.
  pool_resource pool(upstream, large_path_pool());
  std::promise<void> freed;
  std::promise<void> done;
  std::thread owner([&] {
    stream_handle const per_thread = backend().per_thread_default_stream();
    pool.deallocate(pool.allocate(48 * MiB, per_thread), 48 * MiB, per_thread);
    backend().synchronize_stream(per_thread);
    freed.set_value();
    done.get_future().wait();  // alive while `a` misses
  });
  freed.get_future().wait();
  void* on_a = pool.allocate(40 * MiB, a);
  EXPECT_EQ(pool.statistics().idle_takes, 0u);
  done.set_value();
  owner.join();
  pool.deallocate(on_a, 40 * MiB, a);
  pool.check_invariants();
}

TEST_F(pool_test, an_idle_take_of_a_cached_size_brings_a_slab) {
  // One block per miss would bring every later refill of the thread back to the pool's mutex: the
  // take moves a slab of the idle stream's extent into the taker's, and the next refills carve it.
  pool_options options = large_path_pool();
  options.max_cached_size = pool_options{}.max_cached_size;  // 64 KiB blocks are cached sizes
  pool_resource pool(upstream, options);
  stream_handle const own = backend().per_thread_default_stream();  // as above
  void* on_b = pool.allocate(60 * MiB, own);  // the large path: its extents get it back whole
  pool.deallocate(on_b, 60 * MiB, own);
  backend().synchronize_stream(own);
  // 8 MiB of 64 KiB blocks on a: the first 4 MiB from the free extents, then one take.
  std::vector<void*> blocks;
  for (int i = 0; i < 128; ++i)
    blocks.push_back(pool.allocate(64 * KiB, a));
  pool_statistics const st = pool.statistics();
  EXPECT_EQ(st.upstream_allocations, 1u);
  EXPECT_EQ(st.idle_takes, 1u) << "one take for the second 4 MiB of 64 KiB blocks";
  for (void* q : blocks)
    pool.deallocate(q, 64 * KiB, a);
  pool.check_invariants();
}

}  // namespace
}  // namespace gpumem
