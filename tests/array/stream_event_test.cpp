// Streams and events for users: async copies ordered by events, keep-alive of arrays used by
// in-flight copies, auto_synchronize, destruction through the context's release queue.
#include "array_test_support.hpp"
#include "dead_context_backend.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/event.hpp>
#include <gpumem/array/pinned_array.hpp>
#include <gpumem/array/stream.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpumem {
namespace {

TEST(stream_event, copies_on_two_streams_ordered_by_an_event) {
  std::vector<int> host(1000);
  std::iota(host.begin(), host.end(), 0);
  pinned_array<int> src({1000});
  for (int i = 0; i < 1000; ++i)
    src(i) = host[i];
  pinned_array<int> dst({1000});
  device_array<int> d({1000});

  auto a = stream::create(true);
  auto b = stream::create(true);
  test::gate g;
  g.block(a.handle());
  copy(d, src, a);
  event uploaded = a.record();
  b.wait(uploaded);
  copy(dst, d, b);
  // b waits for the event, the event for the gate: nothing on b can have run.
  EXPECT_FALSE(uploaded.query());
  EXPECT_FALSE(b.query());
  g.open();
  b.synchronize();
  EXPECT_TRUE(uploaded.query());
  EXPECT_EQ(dst.to_vector(), host);
}

TEST(stream_event, in_flight_copy_keeps_its_arrays_alive) {
  test::tracked_device_buffer buffer(4096 * sizeof(float));
  std::vector<float> host(4096, 2.5f);
  pinned_array<float> back({4096});
  auto s = stream::create();
  test::gate g;
  g.block(s.handle());
  {
    auto d = wrap_device_array(static_cast<float*>(buffer.ptr), {4096}, buffer.owner());
    d.copy_to_device(host, s);
    copy(back, d, s);
  }  // the last handle of d is gone while both copies wait behind the gate
  EXPECT_FALSE(buffer.released->load()) << "memory freed under an in-flight copy";
  g.open();
  s.synchronize();
  EXPECT_TRUE(buffer.released->load()) << "keep-alive not released after synchronize()";
  EXPECT_EQ(back.to_vector(), host);
}

TEST(stream_event, auto_synchronize_waits_at_scope_end) {
  auto s = stream::create();
  test::gate g;
  std::thread opener;
  {
    auto sync = s.auto_synchronize();
    g.block(s.handle());
    EXPECT_FALSE(s.query());
    // Opens late: without the wait at scope end, the query below would find the gate closed.
    opener = std::thread([&g] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      g.open();
    });
  }
  EXPECT_TRUE(s.query());
  opener.join();
}

TEST(stream_event, default_per_thread_and_wrapped_streams) {
  std::vector<int> host{1, 2, 3, 4};
  for (stream const& s : {stream(), stream::per_thread_default()}) {
    auto d = to_device(host, s);
    std::vector<int> back(4);
    d.copy_to_host(back, s);
    s.synchronize();
    EXPECT_EQ(back, host);
  }
  EXPECT_TRUE(stream().is_default());
  stream_handle raw = backend().create_stream(false);
  {
    auto owner_alive = std::make_shared<int>(1);
    std::weak_ptr<int> watch = owner_alive;
    {
      auto w = stream::wrap(raw, owner_alive);
      owner_alive.reset();
      EXPECT_FALSE(watch.expired());
      auto d = to_device(host, w);
      w.synchronize();
      EXPECT_EQ(d.copy_to_host(), host);
      EXPECT_EQ(w.handle(), raw);
    }
    EXPECT_TRUE(watch.expired());
  }
  backend().destroy_stream(raw);  // wrap() never destroys the external stream
}

TEST(stream_event, events_query_wait_and_time) {
  auto s = stream::create();
  event start = event::create();
  event stop = event::create();
  device_array<char> d({1 << 20});
  std::vector<char> host(1 << 20, 'x');
  start.record(s);
  d.copy_to_device(host, s);
  backend().enqueue_host_function(
      s.handle(), [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  stop.record(s);
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  // At least the 2 ms the stream slept between the records (less the clock's resolution).
  EXPECT_GE(event_elapsed_time(start, stop), 1.9f);
  event plain = event::create(false);
  plain.record(s);
  plain.synchronize();
  test::expect_logic_error([&] { (void)start.elapsed_time(plain); }, "timing = true");
  event empty;
  test::expect_logic_error([&] { empty.record(s); }, "event::record: the event is empty");
  test::expect_logic_error([&] { s.wait(empty); }, "stream::wait: the event is empty");
}

TEST(stream_event, moved_from_stream_throws_instead_of_crashing) {
  auto s = stream::create();
  stream t = std::move(s);
  EXPECT_TRUE(static_cast<bool>(t));
  EXPECT_FALSE(static_cast<bool>(s));
  auto const empty = "stream is empty (moved from)";
  test::expect_logic_error([&] { (void)s.is_default(); }, empty);
  test::expect_logic_error([&] { (void)s.handle(); }, empty);
  test::expect_logic_error([&] { (void)(s == t); }, empty);
  test::expect_logic_error([&] { s.synchronize(); }, empty);
  test::expect_logic_error([&] { (void)s.query(); }, empty);
  test::expect_logic_error([&] { (void)s.record(); }, empty);
  test::expect_logic_error([&] { s.keep_alive(std::make_shared<int>(1)); }, empty);
  test::expect_logic_error([&] { s.keep_alive(nullptr); }, empty);
  test::expect_logic_error([&] { (void)s.auto_synchronize(); }, empty);
  event e = t.record();
  test::expect_logic_error([&] { s.wait(e); }, empty);
  test::expect_logic_error([&] { e.record(s); }, empty);
  test::expect_logic_error([&] { (void)to_device(std::vector<int>{1}, s); }, empty);
  s = t;  // assigning makes it usable again
  EXPECT_TRUE(static_cast<bool>(s));
  EXPECT_EQ(s, t);
  s.synchronize();
}

TEST(stream_event, moved_auto_synchronize_scope_synchronises_once) {
  auto s = stream::create();
  test::gate g;
  std::optional<auto_synchronize_scope> kept;
  {
    auto sync = s.auto_synchronize();
    kept.emplace(std::move(sync));
    g.block(s.handle());
  }  // the moved-from scope ends: it must neither crash nor wait for the blocked stream
  EXPECT_FALSE(s.query());
  g.open();
  kept.reset();  // the scope that took the stream synchronises it
  EXPECT_TRUE(s.query());
}

TEST(stream_event, destruction_goes_through_the_context_queue) {
  auto& queue = current_context().pending_resource_releases();
  queue.flush();
  ASSERT_EQ(queue.size(), 0u);
  if (queue.max_count() < 2) GTEST_SKIP() << "queue limit too small for this test";
  { auto s = stream::create(); }
  EXPECT_EQ(queue.size(), 1u);
  { auto e = event::create(); }
  EXPECT_EQ(queue.size(), 2u);
  {
    auto guard = current_context().pending_resource_releases().defer_cleanup();
    queue.flush();
    EXPECT_EQ(queue.size(), 2u);
  }
  queue.flush();
  EXPECT_EQ(queue.size(), 0u);
  queue.check_invariants();
}

// Numba's cuda.close(): close_for_device_reset, then the CUDA context is reset, which destroys its
// streams and events. A stream or event of the user's that outlives it must not name its handle
// afterwards (a stream or event of the next context may have it by then), as docs/manager.md
// promises for the memory frees ("no stream or event of the dead context named"). They used to be
// destroyed (and a stream with work kept alive synchronised) by handle after the reset.
TEST(stream_event, streams_and_events_that_outlive_a_device_reset_name_no_handle) {
  (void)backend();
  close();
  {
    test::dead_context_device device(64 * MiB);
    std::optional<stream> s = stream::create();
    std::optional<event> e = event::create();
    e->record(*s);
    device_array<int> d({1000});
    std::vector<int> host(1000, 7);
    test::gate g;
    g.block(s->handle());
    d.copy_to_device(host, *s);  // still queued: the stream keeps the array alive
    close_for_device_reset(0);
    device.counter->dead = true;  // cuDevicePrimaryCtxReset
    g.open();
    e.reset();
    s.reset();
    device.counter->dead = false;
    EXPECT_EQ(device.counter->calls_after_death.load(), 0);
    backend().synchronize();
    close();
  }
}

// A stream made by gpumem (stream::create) tells its context's memory manager that it goes before
// it is destroyed (memory_manager::release_stream): a pool keeps what was freed on a stream and
// asks the stream about that memory later, and on a GPU a call on a destroyed stream's handle kills
// the process (docs/mr.md). The host backend reports such a call: the pool's trim then warns that
// the stream "was destroyed without release_stream()".
TEST(stream_event, a_stream_is_released_from_the_memory_manager_before_it_is_destroyed) {
  (void)backend();
  close();
  set_memory_manager(load_memory_manager("pool"));
  std::vector<std::string> warnings;
  log_sink previous = set_log_sink([&warnings](log_level level, std::string_view message) {
    if (level >= log_level::warn) warnings.emplace_back(message);
  });
  {
    context& ctx = current_context();
    {
      stream s = stream::create();
      memory_pointer p = ctx.memory_manager().allocate(8 * MiB, s.handle());
      ASSERT_TRUE(p);
      p = memory_pointer();  // freed on s: the pool keeps the block with s's memory
    }
    ctx.pending_resource_releases().flush();  // the stream's destroy, held in the queue
    ctx.memory_manager().reset();             // the pool settles every stream that holds memory
  }
  set_log_sink(std::move(previous));
  for (std::string const& w : warnings)
    EXPECT_EQ(w.find("without release_stream"), std::string::npos) << w;
  set_memory_manager({});
  close();
}

}  // namespace
}  // namespace gpumem
