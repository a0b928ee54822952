#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpumem {
namespace {

// Hand-written in the style of an RMM log (time of day, "(nil)" and hexadecimal streams), with
// an extra column and the columns reordered.
constexpr char const* small_log =
    "Thread,Time,Action,Pointer,Size,Stream,Comment\n"
    "140001,15:41:27.000100,allocate,0x7f0000000000,1024,0x0,first\n"
    "140001,15:41:27.000200,allocate,0x7f0000000400,4096,0x55aa00,\n"
    "140002,15:41:27.000300,allocate,0x7f0000001400,2048,(nil),x\n"
    "\n"
    "140001,15:41:27.000400,free,0x7f0000000000,1024,0x0,\n"
    "140002,15:41:27.000500,allocate failure,0x0,1099511627776,0x55aa00,\n"
    "140001,15:41:27.000600,allocate,0x7f0000000000,512,0x55aa00,reused address\n"
    "140002,15:41:27.000700,free,0x7f00deadbeef,64,0x0,never allocated\n"
    "140001,15:41:27.000800,free,0x7f0000000400,4096,0x55aa00,\n"
    "140002,15:41:27.000900,free,0x7f0000001400,2048,0x0,\n";

std::vector<log_event> small_events() {
  std::istringstream in(small_log);
  return parse_log(in);
}

TEST(log_replay, parses_a_hand_written_log) {
  auto const events = small_events();
  ASSERT_EQ(events.size(), 9u);
  EXPECT_EQ(events[0].thread, 140001u);
  EXPECT_DOUBLE_EQ(events[0].time_seconds, 15 * 3600 + 41 * 60 + 27.0001);
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[0].pointer, 0x7f0000000000u);
  EXPECT_EQ(events[0].size, 1024u);
  EXPECT_EQ(events[0].stream, 0u);
  EXPECT_EQ(events[1].stream, 0x55aa00u);
  EXPECT_EQ(events[2].stream, 0u);  // (nil)
  EXPECT_EQ(events[3].line, 6u);    // the blank line counts
  EXPECT_EQ(events[3].action, log_action::free);
  EXPECT_EQ(events[4].action, log_action::allocate_failure);
  EXPECT_EQ(events[4].size, std::size_t{1} << 40);
}

TEST(log_replay, replays_with_peak_live_and_held_bytes) {
  auto const events = small_events();
  cuda_resource device;
  statistics_adaptor stats(device);
  replay_options options;
  options.held_bytes = [&] { return static_cast<std::size_t>(stats.bytes().current); };
  replay_result const r = replay(events, stats, options);
  EXPECT_EQ(r.events, 9u);
  EXPECT_EQ(r.allocations, 4u);
  EXPECT_EQ(r.frees, 3u);
  EXPECT_EQ(r.logged_failures, 1u);
  EXPECT_EQ(r.unmatched_frees, 1u);
  EXPECT_EQ(r.out_of_memory, 0u);
  EXPECT_EQ(r.leftover_allocations, 1u);  // the 512-byte block is never freed in the log
  EXPECT_EQ(r.peak_live_bytes, 1024u + 4096u + 2048u);
  EXPECT_EQ(r.peak_held_bytes, 1024u + 4096u + 2048u);
  EXPECT_DOUBLE_EQ(r.fragmentation(), 1.0);
  EXPECT_EQ(stats.allocations().current, 0);  // leftovers were freed
}

// The logged streams are replayed on streams of the resource's own backend (backend_in_use): a
// stream of the process-wide backend is unknown to a resource over a private one, whose frees on it
// were refused, leaking every block freed on a logged stream.
TEST(log_replay, logged_streams_are_made_on_the_resource_backend) {
  auto const events = small_events();
  auto small_device = make_host_backend({16 * MiB});
  cuda_resource device(small_device.get());
  statistics_adaptor stats(device);
  replay_result const r = replay(events, stats);
  EXPECT_EQ(r.frees, 3u);
  EXPECT_EQ(r.leftover_allocations, 1u);
  EXPECT_EQ(stats.allocations().current, 0);  // every free was accepted, leftovers included
  EXPECT_EQ(stats.bytes().current, 0);
  memory_info const info = small_device->get_memory_info();
  EXPECT_EQ(info.free, info.total);
}

TEST(log_replay, out_of_memory_is_counted_or_stops_the_replay) {
  auto const events = small_events();
  cuda_resource device;
  limit_adaptor limited(device, 6 * KiB);  // the 2048-byte allocation does not fit
  replay_result const r = replay(events, limited);
  EXPECT_EQ(r.out_of_memory, 1u);
  EXPECT_EQ(r.unmatched_frees, 2u);  // its free, and the never-allocated one
  EXPECT_EQ(limited.used_bytes(), 0u);

  replay_options stop;
  stop.stop_on_out_of_memory = true;
  EXPECT_THROW(replay(events, limited, stop), out_of_memory);
}

TEST(log_replay, a_pointer_allocated_twice_frees_the_earlier_block_first) {
  // A truncated or merged log: 0x1000 is allocated again while live. The earlier block is freed
  // (an unmatched free), the later one by the log's free; nothing leaks.
  std::istringstream in(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0.1,allocate,0x1000,256,0x0\n"
      "1,0.2,allocate,0x1000,512,0x0\n"
      "1,0.3,allocate,0x2000,0,0x0\n"
      "1,0.4,free,0x1000,512,0x0\n"
      "1,0.5,free,0x0,512,0x0\n");
  auto const events = parse_log(in);
  cuda_resource device;
  statistics_adaptor stats(device);
  replay_result const r = replay(events, stats);
  EXPECT_EQ(r.events, 5u);
  EXPECT_EQ(r.allocations, 2u);
  EXPECT_EQ(r.frees, 1u);
  EXPECT_EQ(r.unmatched_frees, 1u);
  EXPECT_EQ(r.leftover_allocations, 0u);
  EXPECT_EQ(r.peak_live_bytes, 512u);  // the earlier block went first
  EXPECT_EQ(stats.allocations().current, 0);
  EXPECT_EQ(stats.allocations().total, 2);
}

// Records the thread of every call, in order, and passes the calls on.
class thread_recorder final : public memory_resource {
 public:
  explicit thread_recorder(memory_resource& upstream) : upstream_(upstream) {}
  std::string name() const override { return "thread_recorder"; }
  std::vector<std::pair<std::size_t, std::thread::id>> calls;  // (bytes, thread)

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    record(bytes);
    return upstream_.allocate(bytes, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override {
    record(bytes);
    upstream_.deallocate(ptr, bytes, stream);
  }
  void record(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls.emplace_back(bytes, std::this_thread::get_id());
  }
  memory_resource& upstream_;
  std::mutex mutex_;
};

// An exception other than out_of_memory (here from held_bytes) stops the replay too, and what the
// replay had allocated is freed before it is rethrown: nobody else holds those pointers.
TEST(log_replay, an_exception_stops_the_replay_without_leaking_its_blocks) {
  auto const events = small_events();
  for (bool const threads : {false, true}) {
    cuda_resource device;
    statistics_adaptor stats(device);
    replay_options options;
    options.honour_threads = threads;
    int samples = 0;
    options.held_bytes = [&]() -> std::size_t {
      if (++samples == 3) throw std::runtime_error("probe failed");
      return 0;
    };
    EXPECT_THROW(replay(events, stats, options), std::runtime_error);
    EXPECT_EQ(stats.allocations().current, 0) << (threads ? "honour_threads" : "one thread");
    EXPECT_EQ(stats.bytes().current, 0);
  }
}

TEST(log_replay, honour_threads_runs_each_logged_thread_on_its_own_thread_in_log_order) {
  auto const events = small_events();
  cuda_resource device;
  thread_recorder recorder(device);
  replay_options options;
  options.honour_threads = true;
  replay_result const r = replay(events, recorder, options);
  // The same replay as on one thread.
  EXPECT_EQ(r.allocations, 4u);
  EXPECT_EQ(r.frees, 3u);
  EXPECT_EQ(r.unmatched_frees, 1u);
  EXPECT_EQ(r.peak_live_bytes, 1024u + 4096u + 2048u);
  // In log order: 1024, 4096 and the free of 1024 and the 512 from thread 140001; 2048 allocated
  // and freed by thread 140002; the free of 4096 by 140001.
  std::vector<std::size_t> const order{1024, 4096, 2048, 1024, 512, 4096, 2048};
  // Then the leftover 512 bytes, freed by the replay itself on the calling thread.
  ASSERT_EQ(recorder.calls.size(), order.size() + 1);
  EXPECT_EQ(recorder.calls.back(), std::make_pair(std::size_t{512}, std::this_thread::get_id()));
  std::map<std::size_t, std::set<std::thread::id>> by_bytes;
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(recorder.calls[i].first, order[i]) << i;
    by_bytes[recorder.calls[i].first].insert(recorder.calls[i].second);
  }
  std::thread::id const first = recorder.calls[0].second;
  std::thread::id const second = recorder.calls[2].second;
  EXPECT_NE(first, second);
  EXPECT_NE(first, std::this_thread::get_id());
  EXPECT_NE(second, std::this_thread::get_id());
  for (std::size_t bytes : {1024u, 4096u, 512u})
    EXPECT_EQ(by_bytes[bytes], std::set<std::thread::id>{first}) << bytes;
  EXPECT_EQ(by_bytes[2048], std::set<std::thread::id>{second});
  // Without the option, everything runs on the calling thread.
  thread_recorder inline_recorder(device);
  options.honour_threads = false;
  replay(events, inline_recorder, options);
  for (auto const& call : inline_recorder.calls)
    EXPECT_EQ(call.second, std::this_thread::get_id());
}

TEST(log_replay, honour_threads_stops_at_out_of_memory_on_the_replay_thread) {
  auto const events = small_events();
  cuda_resource device;
  limit_adaptor limited(device, 6 * KiB);  // thread 140002's 2048-byte allocation does not fit
  replay_options options;
  options.honour_threads = true;
  options.stop_on_out_of_memory = true;
  EXPECT_THROW(replay(events, limited, options), out_of_memory);
  EXPECT_EQ(limited.used_bytes(), 0u);  // what was live was freed
}

TEST(log_replay, malformed_line_names_its_number) {
  std::istringstream in(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0.5,allocate,0x1000,10,0x0\n"
      "1,0.6,allocate,0x2000,ten,0x0\n");
  try {
    parse_log(in);
    FAIL();
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("line 3"), std::string::npos) << what;
    EXPECT_NE(what.find("ten"), std::string::npos) << what;
  }
}

TEST(log_replay, other_bad_input_is_rejected_with_the_reason) {
  auto message = [](std::string const& text) {
    std::istringstream in(text);
    try {
      parse_log(in);
    } catch (logic_error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_NE(message("Thread,Time,Pointer\n").find("Action"), std::string::npos);
  EXPECT_NE(message("Action,Pointer,Size\nallocate,0x10\n").find("line 2"), std::string::npos);
  EXPECT_NE(message("Action,Pointer,Size\nresize,0x10,5\n").find("resize"), std::string::npos);
  EXPECT_NE(message("Action,Pointer,Size\nallocate,0xZZ,5\n").find("0xZZ"), std::string::npos);
  EXPECT_NE(message("Action,Pointer,Size,Time\nallocate,0x10,5,1:2:3:4\n").find("line 2"),
            std::string::npos);
  EXPECT_NE(message("Action,Pointer,Size\nallocate,0x10,-5\n").find("-5"), std::string::npos);
  // Digits alone: no sign or second "0x" (fields are trimmed); a time is a finite decimal.
  for (char const* field : {"+5", "5x", "0x5"})
    EXPECT_NE(
        message(std::string("Action,Pointer,Size\nallocate,0x10,") + field + "\n").find("line 2"),
        std::string::npos)
        << field;
  for (char const* pointer : {"0x+10", "0x-10", "0x0x10", "0x 10"})
    EXPECT_NE(
        message(std::string("Action,Pointer,Size\nallocate,") + pointer + ",5\n").find("line 2"),
        std::string::npos)
        << pointer;
  for (char const* time : {"nan", "inf", "1e999", "0x1p3", "99:99:99.5", "1:60:00", "1:00:60"})
    EXPECT_NE(message(std::string("Action,Pointer,Size,Time\nallocate,0x10,5,") + time + "\n")
                  .find("line 2"),
              std::string::npos)
        << time;
  // The minimal columns are enough, and "deallocate" is accepted for "free".
  std::istringstream minimal("Action,Pointer,Size\nallocate,0x10,5\ndeallocate,0x10,5\n");
  auto const events = parse_log(minimal);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].action, log_action::free);
}

TEST(log_replay, missing_file_names_the_path) {
  try {
    parse_log_file("/nonexistent/gpumem.csv");
    FAIL();
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/gpumem.csv"), std::string::npos);
  }
}

TEST(log_replay, a_directory_or_a_malformed_file_is_named_by_its_path) {
  try {
    parse_log_file("/tmp");
    FAIL() << "a directory was read as an empty log";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("'/tmp' is a directory"), std::string::npos) << e.what();
  }
  std::string const path = ::testing::TempDir() + "gpumem_malformed_log.csv";
  {
    std::ofstream out(path);
    out << "Action,Pointer,Size\nallocate,0xZZ,5\n";
  }
  try {
    parse_log_file(path);
    FAIL() << "a malformed log was read";
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("line 2"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
  std::remove(path.c_str());
}

TEST(log_replay, a_path_holding_a_nul_byte_is_refused_not_cut_short) {
  // Cut at the NUL, the name would be another file's (here, an existing directory's).
  std::string const path = std::string("/tmp") + '\0' + "gpumem.csv";
  try {
    parse_log_file(path);
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("NUL"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'/tmp\\x00gpumem.csv'"), std::string::npos) << e.what();
  }
}

// A replay that changes thread at every event, over many threads: every event is replayed on its
// thread, in order. (Each hand-over wakes only the thread whose turn it is; with one condition
// variable for all, 64 threads took about 30 times as long as 2. How long it takes is a benchmark's
// question, not this test's.)
TEST(log_replay, honour_threads_hands_over_between_many_threads) {
  for (std::size_t const threads : {2u, 64u}) {
    std::vector<log_event> events(4000);
    for (std::size_t i = 0; i < events.size(); ++i) {
      events[i].thread = 1000 + i % threads;            // a new thread at every event
      events[i].action = log_action::allocate_failure;  // no resource call: only the hand-over
    }
    cuda_resource device;
    replay_options options;
    options.honour_threads = true;
    replay_result const r = replay(events, device, options);
    EXPECT_EQ(r.logged_failures, events.size()) << threads << " threads";
  }
}

}  // namespace
}  // namespace gpumem
