// Copies, fills, streams, events and host functions through the primitive layer. Ordering is made
// observable without timing: a stream_gate holds a stream back, so "not yet complete" is certain
// until the test opens the gate. Runs on both backends.
#include "backend_fixtures.hpp"
#include "log_capture.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using gpumem::backend;
using gpumem::KiB;
using gpumem::test::device_buffer;
using gpumem::test::pinned_buffer;
using gpumem::test::scoped_event;
using gpumem::test::scoped_stream;
using gpumem::test::stream_gate;

namespace {

void fill_pattern(std::uint8_t* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<std::uint8_t>((i * 29 + seed * 101 + (i >> 9)) & 0xff);
}

bool has_pattern(std::uint8_t const* p, std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> expected(n);
  fill_pattern(expected.data(), n, seed);
  return std::equal(expected.begin(), expected.end(), p);
}

}  // namespace

TEST(cuda_copy, sync_copies_and_fills_round_trip) {
  auto& b = backend();
  std::size_t const n = 300 * KiB + 7;
  std::vector<std::uint8_t> src(n), dst(n, 0);
  fill_pattern(src.data(), n, 1);
  device_buffer a(n), c(n);
  b.copy(a.get(), src.data(), n);  // host -> device
  b.copy(c.get(), a.get(), n);     // device -> device
  b.copy(dst.data(), c.get(), n);  // device -> host
  EXPECT_EQ(dst, src);

  b.fill(a.get(), 0x5a, n);
  b.fill(a.as<std::uint8_t>() + 10, 0x00, 5);
  b.copy(dst.data(), a.get(), n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t const expected = (i >= 10 && i < 15) ? 0x00 : 0x5a;
    ASSERT_EQ(dst[i], expected) << "byte " << i;
  }
}

// A null address with bytes to move is cudaErrorInvalidValue, as CUDA reports it (the host
// backend's memmove/memset dereferenced it: a segfault, on a stream's worker for the async forms).
TEST(cuda_copy, a_null_address_with_bytes_is_an_invalid_value_not_a_crash) {
  auto& b = backend();
  device_buffer a(256);
  scoped_stream stream;
  auto const invalid_value = [](auto&& call) {
    try {
      call();
    } catch (gpumem::cuda_error const& e) {
      return e.code() == 1;  // cudaErrorInvalidValue
    }
    return false;
  };
  EXPECT_TRUE(invalid_value([&] { b.copy(nullptr, a.get(), 16); }));
  EXPECT_TRUE(invalid_value([&] { b.copy(a.get(), nullptr, 16); }));
  EXPECT_TRUE(invalid_value([&] { b.fill(nullptr, 0, 16); }));
  EXPECT_TRUE(invalid_value([&] { b.copy_async(nullptr, a.get(), 16, stream.get()); }));
  EXPECT_TRUE(invalid_value([&] { b.copy_async(a.get(), nullptr, 16, stream.get()); }));
  EXPECT_TRUE(invalid_value([&] { b.fill_async(nullptr, 0, 16, stream.get()); }));
  b.synchronize_stream(stream.get());
  EXPECT_NO_THROW(b.copy(nullptr, nullptr, 0));  // nothing to move: still a no-op
  EXPECT_NO_THROW(b.fill_async(nullptr, 0, 0, stream.get()));
}

TEST(cuda_copy, async_chain_on_one_stream_completes_in_order) {
  auto& b = backend();
  std::size_t const n = 1 << 20;
  scoped_stream stream;
  pinned_buffer src(n), dst(n);
  fill_pattern(src.as<std::uint8_t>(), n, 2);
  std::fill_n(dst.as<std::uint8_t>(), n, std::uint8_t{0});
  device_buffer a(n), c(n), d(n);
  scoped_event done;
  {
    stream_gate gate;
    gate.block(stream.get());
    b.copy_async(a.get(), src.get(), n, stream.get());
    b.copy_async(c.get(), a.get(), n, stream.get());
    b.fill_async(c.get(), 0x11, 64, stream.get());  // overwrites the head after the copy
    b.copy_async(d.get(), c.get(), n, stream.get());
    b.copy_async(dst.get(), d.get(), n, stream.get());
    b.record_event(done.get(), stream.get());
    EXPECT_FALSE(b.query_event(done.get())) << "the gate holds the stream; nothing has run";
    EXPECT_FALSE(b.query_stream(stream.get()));
    gate.open();
  }
  b.synchronize_event(done.get());
  EXPECT_TRUE(b.query_event(done.get()));
  auto const* out = dst.as<std::uint8_t>();
  for (std::size_t i = 0; i < 64; ++i)
    ASSERT_EQ(out[i], 0x11) << "byte " << i;
  std::vector<std::uint8_t> expected(n);
  fill_pattern(expected.data(), n, 2);
  EXPECT_TRUE(std::equal(expected.begin() + 64, expected.end(), out + 64));
  b.synchronize_stream(stream.get());
  EXPECT_TRUE(b.query_stream(stream.get()));
}

// The sync forms run on the legacy default stream, which waits for the earlier work of every
// blocking stream (the cuda backend's copy/fill say so, and memalloc and the spill manager rely on
// it). The host backend's legacy stream is an independent queue: the copy read the buffer before
// the blocking stream's fill had run.
TEST(cuda_copy, a_sync_copy_waits_for_earlier_work_on_blocking_streams) {
  auto& b = backend();
  std::size_t const n = 4 * KiB;
  scoped_stream blocking(/*non_blocking=*/false);
  device_buffer a(n);
  b.fill(a.get(), 0x00, n);
  std::vector<std::uint8_t> out(n, 0xff);
  stream_gate gate;
  gate.block(blocking.get());
  b.fill_async(a.get(), 0x5a, n, blocking.get());
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.open();
  });
  b.copy(out.data(), a.get(), n);  // on the legacy stream: after the blocking stream's fill
  opener.join();
  EXPECT_EQ(out[0], 0x5a) << "the sync copy ran before the blocking stream's earlier fill";
  EXPECT_EQ(out[n - 1], 0x5a);
}

// The other directions: work on a blocking stream waits for the legacy stream's earlier work, and
// a non-blocking stream orders with neither (a sync copy does not wait for its held-back work).
TEST(cuda_copy, blocking_streams_wait_for_the_legacy_stream_and_non_blocking_ones_do_not) {
  auto& b = backend();
  std::size_t const n = 4 * KiB;
  device_buffer a(n);
  b.fill(a.get(), 0x00, n);
  {
    scoped_stream blocking(/*non_blocking=*/false);
    stream_gate gate;
    gate.block(nullptr);  // the legacy stream, held back
    b.fill_async(a.get(), 0x11, n, nullptr);
    b.fill_async(a.get(), 0x22, n, blocking.get());  // after the legacy stream's fill
    gate.open();
    b.synchronize_stream(blocking.get());
    std::vector<std::uint8_t> out(n, 0xff);
    b.copy(out.data(), a.get(), n);
    EXPECT_EQ(out[0], 0x22) << "the blocking stream's fill ran before the legacy stream's";
  }
  scoped_stream non_blocking;
  stream_gate gate;
  gate.block(non_blocking.get());
  b.fill_async(a.get(), 0x33, n, non_blocking.get());
  std::vector<std::uint8_t> out(n, 0xff);
  b.copy(out.data(), a.get(), n);  // returns although the non-blocking stream is held back
  EXPECT_EQ(out[0], 0x22);
  gate.open();
}

// A blocking stream destroyed while the legacy stream waits for its earlier work, with later work
// of its own that waits for the legacy stream: cudaStreamDestroy returns at once and the work
// completes. On the host backend the legacy stream's waiting task once held the last reference to
// the stream, destroyed it on the legacy worker (a destruction runs the stream's queue), and the
// stream's later work waited for that same task: both hung.
TEST(cuda_copy, a_blocking_stream_destroyed_while_the_legacy_stream_waits_for_it) {
  auto& b = backend();
  std::size_t const n = 4 * KiB;
  device_buffer a(n);
  gpumem::stream_handle const blocking = b.create_stream(/*non_blocking=*/false);
  stream_gate gate;
  gate.block(blocking);
  b.fill_async(a.get(), 0x11, n, nullptr);   // waits for the held-back stream
  b.fill_async(a.get(), 0x22, n, blocking);  // waits for the legacy stream's fill
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.open();
  });
  // Destroyed once the legacy stream's fill is waiting for the held-back stream.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  b.destroy_stream(blocking);  // returns once the stream's work has run (host) or at once (CUDA)
  opener.join();
  b.synchronize_stream(nullptr);
  std::vector<std::uint8_t> out(n, 0xff);
  b.copy(out.data(), a.get(), n);
  EXPECT_EQ(out[0], 0x22);
}

TEST(cuda_copy, per_thread_default_stream_carries_async_work) {
  auto& b = backend();
  std::size_t const n = 64 * KiB;
  pinned_buffer src(n), dst(n);
  fill_pattern(src.as<std::uint8_t>(), n, 3);
  device_buffer a(n);
  gpumem::stream_handle const s = b.per_thread_default_stream();
  b.copy_async(a.get(), src.get(), n, s);
  b.copy_async(dst.get(), a.get(), n, s);
  b.synchronize_stream(s);
  EXPECT_TRUE(has_pattern(dst.as<std::uint8_t>(), n, 3));
}

// cudaStreamLegacy (handle 1) names the legacy default stream, as the null handle does: work,
// stream-ordered allocations and their frees on it are valid (the host backend took it for a
// destroyed stream, so a free on it failed after the allocation had succeeded).
TEST(cuda_copy, legacy_default_stream_handle_carries_async_work) {
  auto& b = backend();
  std::size_t const n = 64 * KiB;
  pinned_buffer src(n), dst(n);
  fill_pattern(src.as<std::uint8_t>(), n, 5);
  auto const legacy = reinterpret_cast<gpumem::stream_handle>(std::uintptr_t{1});
  void* const a = b.allocate_async(n, legacy);
  b.copy_async(a, src.get(), n, legacy);
  b.copy_async(dst.get(), a, n, legacy);
  b.deallocate_async(a, legacy);
  b.synchronize_stream(legacy);
  EXPECT_TRUE(b.query_stream(legacy));
  EXPECT_TRUE(has_pattern(dst.as<std::uint8_t>(), n, 5));
}

// cudaStreamPerThread is one handle naming each thread's own stream: work one thread holds back
// on it does not hold back another thread (also not a later thread given the first one's id).
TEST(cuda_stream, per_thread_default_stream_is_each_threads_own) {
  GPUMEM_SKIP_WHILE_GATES_SERIALISE();
  auto& b = backend();
  gpumem::stream_handle const s = b.per_thread_default_stream();
  stream_gate gate;
  std::thread t1([&] {
    EXPECT_EQ(b.per_thread_default_stream(), s) << "one handle for every thread";
    gate.block(s);
    EXPECT_FALSE(b.query_stream(s));
  });
  t1.join();
  bool idle_elsewhere = false;
  std::thread t2([&] { idle_elsewhere = b.query_stream(s); });
  t2.join();
  EXPECT_TRUE(idle_elsewhere) << "a new thread saw the exited thread's pending work";
  EXPECT_TRUE(b.query_stream(s)) << "the main thread saw another thread's pending work";
  gate.open();
  b.synchronize();
}

TEST(cuda_event, query_before_record_and_after_completion) {
  auto& b = backend();
  scoped_stream stream;
  scoped_event event;
  EXPECT_TRUE(b.query_event(event.get())) << "an event never recorded counts as complete";
  {
    stream_gate gate;
    gate.block(stream.get());
    b.record_event(event.get(), stream.get());
    EXPECT_FALSE(b.query_event(event.get()));
    gate.open();
  }
  b.synchronize_event(event.get());
  EXPECT_TRUE(b.query_event(event.get()));
}

TEST(cuda_event, elapsed_time_needs_timing_events) {
  auto& b = backend();
  scoped_stream stream;
  scoped_event start(/*timing=*/true), stop(/*timing=*/true);
  b.record_event(start.get(), stream.get());
  b.enqueue_host_function(stream.get(),
                          [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  b.record_event(stop.get(), stream.get());
  b.synchronize_event(stop.get());
  float const ms = b.elapsed_ms(start.get(), stop.get());
  // The host function between the records slept at least 2 ms (less the clock's resolution).
  EXPECT_GE(ms, 1.9f);

  // CUDA documents cudaErrorInvalidResourceHandle for an event never recorded; the host backend
  // raises the same.
  if (b.kind() == gpumem::backend_kind::host) {
    scoped_event never_recorded(/*timing=*/true);
    EXPECT_THROW((void)b.elapsed_ms(start.get(), never_recorded.get()), gpumem::cuda_error);
  }

  scoped_event plain_start(/*timing=*/false), plain_stop(/*timing=*/false);
  b.record_event(plain_start.get(), stream.get());
  b.record_event(plain_stop.get(), stream.get());
  b.synchronize_event(plain_stop.get());
  EXPECT_THROW((void)b.elapsed_ms(plain_start.get(), plain_stop.get()), gpumem::cuda_error);
  EXPECT_THROW((void)b.query_event(nullptr), gpumem::cuda_error);
}

TEST(cuda_event, stream_wait_event_orders_a_second_stream) {
  auto& b = backend();
  std::size_t const n = 256 * KiB;
  scoped_stream first, second;
  pinned_buffer src(n), dst(n);
  fill_pattern(src.as<std::uint8_t>(), n, 4);
  std::fill_n(dst.as<std::uint8_t>(), n, std::uint8_t{0});
  device_buffer a(n);
  b.fill(a.get(), 0, n);
  scoped_event written;
  // Stream 1 is slow: it sleeps before writing `a`. Stream 2 reads `a` only after the event, so it
  // must see stream 1's data, not the zeros that were there before.
  b.enqueue_host_function(first.get(),
                          [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  b.copy_async(a.get(), src.get(), n, first.get());
  b.record_event(written.get(), first.get());
  b.stream_wait_event(second.get(), written.get());
  b.copy_async(dst.get(), a.get(), n, second.get());
  b.synchronize_stream(second.get());
  EXPECT_TRUE(b.query_event(written.get())) << "stream 2 finished, so the event it waited for did";
  EXPECT_TRUE(has_pattern(dst.as<std::uint8_t>(), n, 4));
}

TEST(cuda_event, a_wait_is_for_the_record_it_followed_not_a_later_one) {
  // The event is recorded on a held stream, waited for on a second, then recorded again on an
  // idle third stream, which completes at once. The second stream still waits for the first
  // record (CUDA's rule): its host function runs only once the first stream's hold opens.
  auto& b = backend();
  scoped_stream held, waiting, idle;
  scoped_event event;
  std::atomic<bool> opened{false};
  std::atomic<bool> ran_before_open{false};
  std::atomic<bool> ran{false};
  {
    stream_gate gate;
    gate.block(held.get());
    b.enqueue_host_function(held.get(), [&] {});
    b.record_event(event.get(), held.get());
    b.stream_wait_event(waiting.get(), event.get());
    b.enqueue_host_function(waiting.get(), [&] {
      ran_before_open = !opened.load();
      ran = true;
    });
    b.record_event(event.get(), idle.get());
    b.synchronize_stream(idle.get());
    b.synchronize_event(event.get());  // the latest record: the idle stream's
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(ran.load()) << "the wait ended with a later record of the event";
    opened = true;
    gate.open();
  }
  b.synchronize_stream(waiting.get());
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(ran_before_open.load());
}

TEST(cuda_stream, host_functions_run_in_stream_order_after_prior_work) {
  auto& b = backend();
  scoped_stream stream;
  std::mutex m;
  std::vector<int> order;
  std::size_t const n = 128 * KiB;
  pinned_buffer src(n), dst(n);
  fill_pattern(src.as<std::uint8_t>(), n, 5);
  device_buffer a(n);
  bool copied_before_callback = false;
  auto const* dst_bytes = dst.as<std::uint8_t>();
  b.copy_async(a.get(), src.get(), n, stream.get());
  b.copy_async(dst.get(), a.get(), n, stream.get());
  for (int i = 0; i < 5; ++i) {
    b.enqueue_host_function(stream.get(), [&, i] {
      std::lock_guard<std::mutex> lock(m);
      if (i == 0) copied_before_callback = has_pattern(dst_bytes, n, 5);
      order.push_back(i);
    });
  }
  b.synchronize_stream(stream.get());
  std::lock_guard<std::mutex> lock(m);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(copied_before_callback) << "a host function runs after the stream's prior copies";
}

TEST(cuda_stream, blocking_and_non_blocking_streams_can_be_created_and_destroyed) {
  auto& b = backend();
  for (bool non_blocking : {false, true}) {
    gpumem::stream_handle s = b.create_stream(non_blocking);
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(b.query_stream(s));
    b.synchronize_stream(s);
    b.destroy_stream(s);
  }
  EXPECT_NO_THROW(b.synchronize());
}

TEST(cuda_stream, a_device_wide_synchronize_beside_stream_destruction_is_safe) {
  // CUDA allows cudaDeviceSynchronize on one thread while others destroy their streams: the
  // synchronisation must not wait on a stream freed under it (a crash, or a hang that holds up
  // whoever called it, such as a pool's out-of-memory path).
  auto& b = backend();
  std::atomic<int> running{3};
  std::vector<std::thread> churners;
  for (int t = 0; t < 3; ++t)
    churners.emplace_back([&] {
      for (int round = 0; round < 25; ++round) {
        // Streams with work queued, destroyed while it may still run: a synchronisation that has
        // seen one waits for it.
        std::vector<gpumem::stream_handle> streams;
        for (int i = 0; i < 8; ++i) {
          streams.push_back(b.create_stream(true));
          b.enqueue_host_function(
              streams.back(), [] { std::this_thread::sleep_for(std::chrono::microseconds(50)); });
        }
        for (gpumem::stream_handle s : streams)
          b.destroy_stream(s);
      }
      running.fetch_sub(1);
    });
  int synchronizations = 0;
  while (running.load() > 0) {
    b.synchronize();
    ++synchronizations;
  }
  for (auto& t : churners)
    t.join();
  EXPECT_GT(synchronizations, 0);
}

TEST(cuda_stream, stream_ids_are_stable_and_never_reused) {
  auto& b = backend();
  std::uint64_t const null_id = b.stream_id(nullptr);
  EXPECT_EQ(b.stream_id(nullptr), null_id) << "the null stream keeps its id";
  std::vector<std::uint64_t> seen{null_id};
  for (int round = 0; round < 8; ++round) {
    gpumem::stream_handle const s = b.create_stream(round % 2 == 0);
    std::uint64_t const id = b.stream_id(s);
    EXPECT_EQ(b.stream_id(s), id);
    for (std::uint64_t old : seen)
      EXPECT_NE(id, old) << "round " << round << ": a stream got an id given before (handles "
                         << "may be reused after destroy_stream, ids never)";
    seen.push_back(id);
    b.destroy_stream(s);
  }
  gpumem::stream_handle const per_thread = b.per_thread_default_stream();
  std::uint64_t const mine = b.stream_id(per_thread);
  EXPECT_EQ(b.stream_id(per_thread), mine);
  std::uint64_t theirs = mine;
  std::thread other([&] { theirs = b.stream_id(per_thread); });
  other.join();
  EXPECT_NE(theirs, mine) << "the per-thread stream's id is the calling thread's own stream's";
}

TEST(cuda_stream, no_stream_is_capturing_unless_a_capture_runs_or_is_simulated) {
  auto& b = backend();
  scoped_stream created;
  EXPECT_FALSE(b.stream_is_capturing(created.get()));
  EXPECT_FALSE(b.stream_is_capturing(nullptr));
  EXPECT_FALSE(b.stream_is_capturing(b.per_thread_default_stream()));
  if (gpumem::test::on_cuda()) {
    EXPECT_THROW(gpumem::simulate_stream_capture(b, created.get(), true), gpumem::not_supported);
    return;
  }
  // The host backend has no graphs: tests mark streams (simulate_stream_capture).
  gpumem::simulate_stream_capture(b, created.get(), true);
  EXPECT_TRUE(b.stream_is_capturing(created.get()));
  EXPECT_FALSE(b.stream_is_capturing(nullptr)) << "only the marked stream";
  gpumem::simulate_stream_capture(b, created.get(), false);
  EXPECT_FALSE(b.stream_is_capturing(created.get()));
  // A mark goes with its stream: a new stream at the same address is not captured.
  gpumem::stream_handle const s = b.create_stream(true);
  gpumem::simulate_stream_capture(b, s, true);
  b.destroy_stream(s);
  EXPECT_FALSE(b.stream_is_capturing(s));
}

TEST(cuda_event, destroying_an_event_with_a_pending_record_is_safe) {
  auto& b = backend();
  scoped_stream stream;
  {
    stream_gate gate;
    gate.block(stream.get());
    gpumem::event_handle e = b.create_event(false);
    b.record_event(e, stream.get());
    b.destroy_event(e);  // the record has not run yet; CUDA releases the event after it has
    gate.open();
  }
  b.synchronize_stream(stream.get());
  EXPECT_TRUE(b.query_stream(stream.get()));
}

TEST(cuda_stream, a_throwing_host_function_is_reported_and_the_stream_goes_on) {
  auto& b = backend();
  scoped_stream stream;
  gpumem::test::error_log_capture capture;
  bool ran_after = false;
  b.enqueue_host_function(stream.get(),
                          [] { throw std::runtime_error("host function 42 failed"); });
  b.enqueue_host_function(stream.get(), [&] { ran_after = true; });
  b.synchronize_stream(stream.get());
  EXPECT_TRUE(ran_after);
  std::vector<std::string> const errors = capture.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("host function 42 failed"), std::string::npos) << errors[0];
}
