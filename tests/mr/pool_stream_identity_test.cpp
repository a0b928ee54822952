// The pool names streams by an id that is never reused (device_backend::stream_id, cudaStreamGetId
// on the cuda backend), not by handle: a stream created at a destroyed stream's address inherits
// none of its arena, and the entries of released streams do not pile up.
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "dead_stream_backend.hpp"
#include "pool_test_support.hpp"
#include "recycling_backend.hpp"
#include "scoped_backend.hpp"

namespace gpumem {
namespace {

using test::recycling_backend;

struct recycled_device {
  recycled_device()
      : inner(make_host_backend(host_backend_options{512 * MiB})),
        recycler(new recycling_backend(*inner)),
        installed(std::unique_ptr<device_backend>(recycler)) {}
  std::unique_ptr<device_backend> inner;  // outlives the scoped backend that forwards to it
  recycling_backend* recycler;            // owned by `installed`
  test::scoped_backend installed;
};

// With wait_across_streams too: the new stream must not take the old one's memory by waiting for
// an event recorded at the handle, which now names the new stream itself.
class pool_stream_identity_waits : public ::testing::TestWithParam<bool> {};

TEST_P(pool_stream_identity_waits, a_stream_at_a_reused_handle_inherits_nothing) {
  recycled_device device;
  stream_handle const s = backend().create_stream(true);
  {
    cuda_resource upstream;
    pool_options options;
    options.wait_across_streams = GetParam();
    pool_resource pool(upstream, options);
    test::closed_gate gate(s);  // the old stream's work is still pending
    for (std::size_t bytes : {std::size_t{4 * KiB}, std::size_t{8 * MiB}}) {
      void* const p = pool.allocate(bytes, s);
      pool.deallocate(p, bytes, s);
      void* const again = pool.allocate(bytes, s);
      EXPECT_EQ(again, p) << bytes << ": a stream reuses its own free at once (stream order)";
      pool.deallocate(again, bytes, s);
      device.recycler->recycle(s);  // s is gone; a new stream has its address
      void* const fresh = pool.allocate(bytes, s);
      EXPECT_NE(fresh, p) << bytes << ": the new stream was given a block that the old stream's "
                          << "pending work may still use";
      pool.deallocate(fresh, bytes, s);
    }
    pool.check_invariants();
    gate.open();
    pool.release_stream(s);
  }
  backend().destroy_stream(s);
}

INSTANTIATE_TEST_SUITE_P(wait_across_streams, pool_stream_identity_waits, ::testing::Bool());

// A free finds the thread's last cache by handle, without asking the stream's id: a released
// entry never matches so. Thread `a` last used the old stream, which another thread releases and
// destroys (a new stream gets its address); `a` then frees a block allocated on the new stream,
// and the block joins the new stream, which reuses it at once.
TEST(pool_stream_identity, a_free_at_a_released_streams_handle_goes_to_the_new_stream) {
  recycled_device device;
  stream_handle const s = backend().create_stream(true);
  {
    cuda_resource upstream;
    pool_resource pool(upstream, pool_options{});
    std::size_t const bytes = 4 * KiB;
    std::promise<void> used_old;
    std::promise<void*> block_of_new;
    std::future<void*> reused = std::async(std::launch::async, [&] {
      pool.deallocate(pool.allocate(bytes, s), bytes, s);  // a's last cache: the old stream's
      used_old.set_value();
      void* const block = block_of_new.get_future().get();
      pool.deallocate(block, bytes, s);
      void* const again = pool.allocate(bytes, s);
      pool.deallocate(again, bytes, s);
      return again;
    });
    used_old.get_future().get();
    backend().synchronize_stream(s);
    pool.release_stream(s);
    device.recycler->recycle(s);  // released and gone; a new stream has its address
    void* const block = pool.allocate(bytes, s);
    block_of_new.set_value(block);
    EXPECT_EQ(reused.get(), block) << "the free did not go to the new stream";
    pool.check_invariants();
    backend().synchronize_stream(s);
    pool.release_stream(s);
  }
  backend().destroy_stream(s);
}

TEST(pool_stream_identity, released_streams_leave_no_entries_behind) {
  test::scoped_backend device(512 * MiB);
  cuda_resource upstream;
  pool_resource pool(upstream, pool_options{});
  for (int round = 0; round < 40; ++round) {
    stream_handle const s = backend().create_stream(round % 2 == 0);
    for (std::size_t bytes : {std::size_t{256}, std::size_t{64 * KiB}, std::size_t{4 * MiB}}) {
      void* const p = pool.allocate(bytes, s);
      pool.deallocate(p, bytes, s);
    }
    pool.release_stream(s);
    backend().destroy_stream(s);
    pool.check_invariants();
  }
  EXPECT_LE(pool.statistics().streams, 1u) << "entries of released streams piled up";
}

TEST(pool_stream_identity, another_threads_cache_of_a_released_stream_goes_at_its_next_miss) {
  test::scoped_backend device(512 * MiB);
  cuda_resource upstream;
  pool_resource pool(upstream, pool_options{});
  stream_handle const s = backend().create_stream(true);
  std::promise<void> used, released;
  std::thread worker([&] {
    void* const p = pool.allocate(4 * KiB, s);  // the worker's cache for s
    pool.deallocate(p, 4 * KiB, s);
    used.set_value();
    released.get_future().wait();
    void* const q = pool.allocate(4 * KiB, nullptr);  // a miss: drops the cache of released s
    pool.deallocate(q, 4 * KiB, nullptr);
  });
  used.get_future().wait();
  pool.release_stream(s);
  EXPECT_EQ(pool.statistics().streams, 1u) << "s's entry stays while the worker's cache has it";
  released.set_value();
  worker.join();
  backend().destroy_stream(s);
  EXPECT_EQ(pool.statistics().streams, 1u) << "only the null stream's entry should be left";
  pool.check_invariants();
}

TEST(pool_stream_identity, using_a_released_stream_again_undoes_the_release) {
  test::scoped_backend device(512 * MiB);
  cuda_resource upstream;
  pool_resource pool(upstream, pool_options{});
  stream_handle const s = backend().create_stream(true);
  std::promise<void> used, released;
  std::size_t streams_after_miss = 0;
  std::thread worker([&] {
    void* const p = pool.allocate(4 * KiB, s);
    pool.deallocate(p, 4 * KiB, s);
    used.set_value();
    released.get_future().wait();
    void* const again = pool.allocate(4 * KiB, s);    // the stream is used again: not released
    void* const q = pool.allocate(4 * KiB, nullptr);  // a miss: must keep the cache of s
    streams_after_miss = pool.statistics().streams;
    pool.deallocate(q, 4 * KiB, nullptr);
    pool.deallocate(again, 4 * KiB, s);
  });
  used.get_future().wait();
  pool.release_stream(s);
  released.set_value();
  worker.join();
  EXPECT_EQ(streams_after_miss, 2u) << "s's entry was dropped although s is in use again";
  pool.release_stream(s);
  backend().destroy_stream(s);
  pool.check_invariants();
}

// release_stream's contract: after it, the pool never touches the stream again, even when blocks
// of the stream were still live then and are freed on it later (CuPy frees an array on its
// allocation stream). Such a free waits for the stream and keeps nothing of it, so destroying the
// stream right after is safe and the next out-of-memory is gpumem::out_of_memory, not an error of
// a destroyed stream (the host backend reports any use of one).
TEST(pool_stream_identity, frees_after_release_stream_keep_nothing_of_the_stream) {
  cuda_resource upstream;
  pool_resource pool(upstream, pool_options{});
  std::vector<stream_handle> streams;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int i = 0; i < 4; ++i) {
    stream_handle const s = backend().create_stream(true);
    streams.push_back(s);
    for (std::size_t bytes : {std::size_t{4 * MiB}, std::size_t{8 * MiB}, std::size_t{4 * KiB}})
      blocks.emplace_back(pool.allocate(bytes, s), bytes);
  }
  for (stream_handle s : streams) {
    backend().synchronize_stream(s);
    pool.release_stream(s);  // its blocks are still live
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)
    pool.deallocate(blocks[i].first, blocks[i].second, streams[i / 3]);
  EXPECT_EQ(pool.statistics().live_bytes, 0u);
  pool.check_invariants();
  for (stream_handle s : streams)
    backend().destroy_stream(s);
  EXPECT_THROW((void)pool.allocate(std::size_t{1} << 50, nullptr), out_of_memory);
  EXPECT_THROW((void)pool.allocate(std::size_t{1} << 40, nullptr), out_of_memory);
  // What the streams freed is the pool's again: every chunk goes back.
  pool.trim();
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  EXPECT_LE(pool.statistics().streams, 1u) << "entries of the released streams are left";
}

// A stream destroyed without release_stream (streams die in real programs: a library's RAII
// stream, a thread's) must not break the pool, on either backend: the pool uses a stream's handle
// only in calls made on that stream (on CUDA any use of a destroyed stream's handle is undefined,
// and driver 580 kills the process), so nothing it does later touches the dead one. Its memory is
// free again after the pool's next device synchronisation (a trim, or the last resort before
// out-of-memory). Run through dead_stream_backend, which refuses and counts every call naming the
// dead stream, and straight on the backend under test (on a GPU, a use would crash the test).
// (wait_across_streams, expandable, through dead_stream_backend)
class pool_dead_streams : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};

TEST_P(pool_dead_streams, a_stream_destroyed_without_release_stream_is_never_used_again) {
  auto const [wait_across_streams, expandable, strict_backend] = GetParam();
  test::dead_stream_backend strict(backend());
  device_backend& device = strict_backend ? static_cast<device_backend&>(strict) : backend();
  cuda_resource upstream;
  pool_options options;
  options.maximum_size = 64 * MiB;
  options.wait_across_streams = wait_across_streams;
  options.expandable = expandable;
  options.fence_bytes = 1 * MiB;  // fences on the dead stream too, some still pending
  options.backend = &device;
  pool_resource pool(upstream, options);
  stream_handle const s = device.create_stream(true);
  stream_handle const other = device.create_stream(true);
  std::vector<std::pair<void*, std::size_t>> on_other;
  for (std::size_t bytes :
       {std::size_t{4 * KiB}, std::size_t{1 * MiB}, std::size_t{8 * MiB}, std::size_t{24 * MiB}}) {
    void* const p = pool.allocate(bytes, s);
    device.fill_async(p, 0x5a, bytes, s);
    pool.deallocate(p, bytes, s);
    on_other.emplace_back(pool.allocate(bytes / 4, other), bytes / 4);  // misses on `other`
  }
  // A thread of its own used s as well and is gone; its cache went back to s's lists.
  std::thread([&] { pool.deallocate(pool.allocate(64 * KiB, s), 64 * KiB, s); }).join();
  device.destroy_stream(s);  // its fill may still run: its memory is not free before a wait
  for (auto const& [p, bytes] : on_other)
    pool.deallocate(p, bytes, other);
  // Only the dead stream's memory makes room for this one: found after a device synchronisation,
  // not an error of the destroyed stream.
  void* big = nullptr;
  EXPECT_NO_THROW(big = pool.allocate(56 * MiB, other));
  if (big != nullptr) pool.deallocate(big, 56 * MiB, other);
  EXPECT_THROW((void)pool.allocate(std::size_t{1} << 40, other), out_of_memory);
  EXPECT_NO_THROW(pool.trim());
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().held_bytes, 0u) << "the dead stream's memory was not taken back";
  EXPECT_GE(pool.statistics().synchronizations, 1u);
  // s's entry stays while this thread's cache for it does (the pool cannot tell that s is gone),
  // but holds nothing.
  EXPECT_LE(pool.statistics().streams, 2u);
  EXPECT_EQ(strict.dead_uses(), 0u) << "first: " << strict.first_dead_use();
  pool.release_stream(other);
  device.destroy_stream(other);
}

INSTANTIATE_TEST_SUITE_P(all, pool_dead_streams,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()));

// A thread that creates a stream, allocates and frees on it and destroys it, over and over,
// without release_stream: the pool's entries and the thread's caches stay bounded, and a trim
// takes every block back.
TEST(pool_stream_identity, streams_destroyed_without_release_stream_in_a_loop_leave_nothing) {
  test::dead_stream_backend strict(backend());
  cuda_resource upstream;
  pool_options options;
  options.backend = &strict;
  pool_resource pool(upstream, options);
  for (int i = 0; i < 300; ++i) {
    stream_handle const s = strict.create_stream(true);
    for (std::size_t bytes : {std::size_t{256}, std::size_t{64 * KiB}, std::size_t{2 * MiB}})
      pool.deallocate(pool.allocate(bytes, s), bytes, s);
    strict.destroy_stream(s);
    pool.check_invariants();
  }
  // Orphans go after the synchronisations the pool runs on a thread of its own: well under one
  // entry per stream, whatever the timing.
  EXPECT_LE(pool.statistics().streams, 150u) << "entries of dead streams pile up";
  pool.trim();
  pool.check_invariants();
  EXPECT_EQ(pool.statistics().held_bytes, 0u);
  EXPECT_EQ(strict.dead_uses(), 0u) << "first: " << strict.first_dead_use();
}

// The same when a new stream took the dead one's address: its id tells them apart, and the new
// stream gets none of the old one's memory before the device has been synchronised.
TEST(pool_stream_identity, a_stream_destroyed_without_release_stream_at_a_reused_handle) {
  recycled_device device;
  stream_handle const s = backend().create_stream(true);
  {
    cuda_resource upstream;
    pool_resource pool(upstream, pool_options{});
    void* const p = pool.allocate(8 * MiB, s);
    pool.deallocate(p, 8 * MiB, s);
    device.recycler->recycle(s);  // destroyed without release_stream; a new stream has its address
    void* const fresh = pool.allocate(8 * MiB, s);
    // The old stream's block only after the device has been synchronised.
    if (fresh == p) {
      EXPECT_GE(pool.statistics().synchronizations, 1u)
          << "the new stream inherited the old one's block without a wait";
    }
    pool.deallocate(fresh, 8 * MiB, s);
    EXPECT_NO_THROW(pool.trim());
    EXPECT_GE(pool.statistics().synchronizations, 1u) << "the dead stream was not waited for";
    pool.check_invariants();
    pool.release_stream(s);
  }
  backend().destroy_stream(s);
}

// A free finds the thread's last cache by handle only where the handle names one stream for good
// (the null and per-thread default streams). A created stream may be destroyed without
// release_stream and a new one created at its address: a free on the new stream from a thread
// whose last cache was the old stream's must go to the new stream's entry. Matched by handle, it
// went to the old stream's, and the fence that free recorded (on the handle, that is on the new
// stream) covered the old stream's memory, whose pending work no event on the new stream orders:
// another stream was handed the old stream's block without a device synchronisation.
TEST(pool_stream_identity, a_free_on_a_new_stream_at_a_dead_streams_handle_is_not_the_dead_ones) {
  recycled_device device;
  stream_handle const s = backend().create_stream(true);
  stream_handle const a = backend().create_stream(true);
  {
    cuda_resource upstream;
    pool_options options;
    options.initial_size = 8 * MiB;
    options.chunk_size = 8 * MiB;
    options.maximum_size = 8 * MiB;
    options.fence_bytes = 1 * MiB;  // the large path fences every MiB it frees beyond what it takes
    pool_resource pool(upstream, options);
    // The old stream frees a large block into its extents; no fence (it is the only stream).
    void* const p = pool.allocate(2 * MiB, s);
    pool.deallocate(p, 2 * MiB, s);  // this thread's last cache: the old stream's
    device.recycler->recycle(s);     // destroyed without release_stream; a new one at its address
    // Another thread allocates on the new stream; this one frees that block there.
    void* const q = std::async(std::launch::async, [&] { return pool.allocate(2 * MiB, s); }).get();
    pool.deallocate(q, 2 * MiB, s);
    backend().synchronize_stream(s);
    // A miss on a: the old stream's block only after a device synchronisation.
    void* const on_a = pool.allocate(6 * MiB, a);
    auto const x = reinterpret_cast<std::uintptr_t>(on_a);
    auto const y = reinterpret_cast<std::uintptr_t>(p);
    if (x < y + 2 * MiB && y < x + 6 * MiB) {
      EXPECT_GE(pool.statistics().synchronizations, 1u)
          << "a was given the dead stream's block on a fence recorded on the new stream";
    }
    pool.deallocate(on_a, 6 * MiB, a);
    pool.check_invariants();
    pool.release_stream(s);
    pool.release_stream(a);
  }
  backend().destroy_stream(s);
  backend().destroy_stream(a);
}

}  // namespace
}  // namespace gpumem
