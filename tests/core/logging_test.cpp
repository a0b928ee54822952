// The default log sink's level follows the environment snapshot (GPUMEM_LOG_LEVEL).
#include <gpumem/core/environment.hpp>
#include <gpumem/core/logging.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

namespace {

// Sets GPUMEM_LOG_LEVEL for one test and puts the old value (and snapshot) back.
class scoped_log_level {
 public:
  explicit scoped_log_level(char const* value) {
    if (char const* old = std::getenv("GPUMEM_LOG_LEVEL")) old_ = old, had_ = true;
    ::setenv("GPUMEM_LOG_LEVEL", value, 1);
    gpumem::reload_environment();
  }
  ~scoped_log_level() {
    if (had_)
      ::setenv("GPUMEM_LOG_LEVEL", old_.c_str(), 1);
    else
      ::unsetenv("GPUMEM_LOG_LEVEL");
    gpumem::reload_environment();
  }
  scoped_log_level(scoped_log_level const&) = delete;
  scoped_log_level& operator=(scoped_log_level const&) = delete;

 private:
  std::string old_;
  bool had_ = false;
};

// What the default sink prints for `level`.
std::string printed(gpumem::log_level level, char const* message) {
  ::testing::internal::CaptureStderr();
  gpumem::log(level, message);
  return ::testing::internal::GetCapturedStderr();
}

}  // namespace

// The level used to be read once per process: reload_environment() never changed it.
TEST(logging, the_default_sink_follows_reload_environment) {
  gpumem::log_sink const custom = gpumem::set_log_sink({});  // the default sink
  {
    scoped_log_level const level("warn");
    EXPECT_NE(printed(gpumem::log_level::warn, "warn-1").find("gpumem [warn] warn-1"),
              std::string::npos);
    EXPECT_EQ(printed(gpumem::log_level::info, "info-1"), "");
  }
  {
    scoped_log_level const level("error");
    EXPECT_EQ(printed(gpumem::log_level::warn, "warn-2"), "");
    EXPECT_NE(printed(gpumem::log_level::error, "error-2").find("error-2"), std::string::npos);
  }
  {
    scoped_log_level const level("off");
    EXPECT_EQ(printed(gpumem::log_level::error, "error-3"), "");
  }
  {
    scoped_log_level const level("debug");
    EXPECT_NE(printed(gpumem::log_level::debug, "debug-4").find("debug-4"), std::string::npos);
    EXPECT_EQ(printed(gpumem::log_level::trace, "trace-4"), "");
  }
  gpumem::set_log_sink(custom);
}

// A sink that logs (itself, or through gpumem code it calls, e.g. a free that reports a problem)
// used to take the sink's mutex a second time on the same thread: the process hung. The inner
// message goes to stderr.
TEST(logging, a_message_logged_from_inside_the_sink_does_not_deadlock) {
  std::vector<std::string> seen;
  gpumem::log_sink const previous =
      gpumem::set_log_sink([&seen](gpumem::log_level level, std::string_view message) {
        seen.emplace_back(message);
        if (message == "outer") gpumem::log(level, "inner");
      });
  ::testing::internal::CaptureStderr();
  auto done =
      std::async(std::launch::async, [] { gpumem::log(gpumem::log_level::error, "outer"); });
  bool const returned = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  std::string const err = ::testing::internal::GetCapturedStderr();
  if (!returned) {
    ADD_FAILURE() << "gpumem::log called from inside the sink deadlocked";
    std::fflush(stdout);
    std::_Exit(1);  // the logging thread holds the mutex for ever: nothing else can run
  }
  gpumem::set_log_sink(previous);
  EXPECT_EQ(seen, std::vector<std::string>{"outer"});
  EXPECT_NE(err.find("gpumem [error] inner"), std::string::npos) << err;
}
