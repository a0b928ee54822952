#include "log_capture.hpp"
#include "resource_test_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/log_replay.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

namespace gpumem {
namespace {

TEST(logging_adaptor, output_parses_back_through_log_replay) {
  cuda_resource device;
  limit_adaptor limited(device, 64 * KiB);
  std::ostringstream out;
  logging_adaptor logged(limited, out);
  test::scoped_stream stream;

  void* a = logged.allocate(1000, stream);
  void* b = logged.allocate(2000, nullptr);
  EXPECT_THROW(logged.allocate(1 * MiB, stream), out_of_memory);
  logged.deallocate(a, 1000, stream);
  void* c = logged.allocate(3000, stream);
  logged.deallocate(b, 2000, nullptr);
  logged.deallocate(c, 3000, stream);
  backend().synchronize_stream(stream);

  std::string const text = out.str();
  EXPECT_EQ(text.rfind(std::string(logging_adaptor::header()) + "\n", 0), 0u) << text;
  std::istringstream in(text);
  auto const events = parse_log(in);
  ASSERT_EQ(events.size(), 7u) << text;
  auto const s = reinterpret_cast<std::uintptr_t>(stream.get());
  struct expected {
    log_action action;
    void* pointer;
    std::size_t size;
    std::uintptr_t stream;
  };
  expected const want[] = {
      {log_action::allocate, a, 1000, s},
      {log_action::allocate, b, 2000, 0},
      {log_action::allocate_failure, nullptr, 1 * MiB, s},
      {log_action::free, a, 1000, s},
      {log_action::allocate, c, 3000, s},
      {log_action::free, b, 2000, 0},
      {log_action::free, c, 3000, s},
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(events[i].action, want[i].action);
    EXPECT_EQ(events[i].pointer, reinterpret_cast<std::uintptr_t>(want[i].pointer));
    EXPECT_EQ(events[i].size, want[i].size);
    EXPECT_EQ(events[i].stream, want[i].stream);
    EXPECT_EQ(events[i].line, i + 2);
    EXPECT_GT(events[i].time_seconds, 1.5e9);  // seconds since 1970: after 2017
  }
  EXPECT_EQ(events[0].thread, events[6].thread);

  // And the log replays: 1000 + 2000 live at most, then 2000 + 3000.
  cuda_resource replay_device;
  statistics_adaptor stats(replay_device);
  replay_options options;
  options.held_bytes = [&] { return static_cast<std::size_t>(stats.bytes().current); };
  replay_result const r = replay(events, stats, options);
  EXPECT_EQ(r.allocations, 3u);
  EXPECT_EQ(r.frees, 3u);
  EXPECT_EQ(r.logged_failures, 1u);
  EXPECT_EQ(r.peak_live_bytes, 5000u);
  EXPECT_EQ(r.peak_held_bytes, 5000u);
  EXPECT_DOUBLE_EQ(r.fragmentation(), 1.0);
  EXPECT_EQ(stats.allocations().current, 0);
}

TEST(logging_adaptor, writes_to_a_file) {
  std::string const path = ::testing::TempDir() + "gpumem_logging_adaptor_test.csv";
  cuda_resource device;
  {
    logging_adaptor logged(device, path, logging_options{true});
    void* p = logged.allocate(256, nullptr);
    logged.deallocate(p, 256, nullptr);
  }
  auto const events = parse_log_file(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[1].action, log_action::free);
  EXPECT_EQ(events[0].pointer, events[1].pointer);
  std::remove(path.c_str());
}

TEST(logging_adaptor, unopenable_file_names_the_path) {
  cuda_resource device;
  try {
    logging_adaptor logged(device, "/nonexistent-dir/log.csv");
    FAIL();
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/log.csv"), std::string::npos);
  }
}

// A stream buffer that refuses every byte once `failing` is set (a full disk, a closed pipe).
class failing_buffer final : public std::streambuf {
 public:
  bool failing = false;

 protected:
  int overflow(int c) override {
    if (failing) return traits_type::eof();
    text_ += static_cast<char>(c);
    return c;
  }
  std::streamsize xsputn(char const* s, std::streamsize n) override {
    if (failing) return 0;
    text_.append(s, static_cast<std::size_t>(n));
    return n;
  }

 private:
  std::string text_;
};

// A stream that throws on a write error: allocate still hands out the block the upstream gave
// (before, it threw and the block leaked, still live upstream), and the failure is reported once.
TEST(logging_adaptor, a_throwing_stream_neither_leaks_a_block_nor_fails_the_call) {
  cuda_resource device;
  statistics_adaptor stats(device);
  failing_buffer buffer;
  std::ostream out(&buffer);
  logging_adaptor logged(stats, out);
  test::error_log_capture errors;
  buffer.failing = true;
  out.exceptions(std::ios::badbit | std::ios::failbit);
  void* p = nullptr;
  EXPECT_NO_THROW(p = logged.allocate(4096, nullptr));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(stats.bytes().current, 4096);
  EXPECT_THROW(logged.allocate(std::size_t{1} << 62, nullptr), out_of_memory);  // unchanged
  logged.deallocate(p, 4096, nullptr);
  EXPECT_EQ(stats.bytes().current, 0);
  EXPECT_NO_THROW(logged.flush());
  EXPECT_TRUE(logged.write_failed());
  ASSERT_EQ(errors.errors().size(), 1u);
  EXPECT_NE(errors.errors()[0].find("writing the log failed"), std::string::npos)
      << errors.errors()[0];
}

// The header promises that write errors are reported: a log to a full device is not lost silently.
TEST(logging_adaptor, write_errors_are_reported_once) {
  if (!std::ifstream("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  cuda_resource device;
  for (bool const auto_flush : {true, false}) {
    test::error_log_capture errors;
    {
      logging_adaptor logged(device, std::string("/dev/full"), logging_options{auto_flush});
      for (int i = 0; i < 3; ++i)
        logged.deallocate(logged.allocate(1024, nullptr), 1024, nullptr);
      logged.flush();
      EXPECT_TRUE(logged.write_failed());
    }
    EXPECT_EQ(errors.errors().size(), 1u) << "auto_flush " << auto_flush;
  }
  // A stream that is fine from start to end reports nothing.
  test::error_log_capture errors;
  std::ostringstream out;
  {
    logging_adaptor logged(device, out);
    logged.deallocate(logged.allocate(1024, nullptr), 1024, nullptr);
    EXPECT_FALSE(logged.write_failed());
  }
  EXPECT_TRUE(errors.errors().empty());
}

}  // namespace
}  // namespace gpumem
