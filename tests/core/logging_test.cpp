// The default log sink's level follows the environment snapshot (GPUMEM_LOG_LEVEL).
#include <gpumem/core/environment.hpp>
#include <gpumem/core/logging.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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
