// An invalid gpumem environment variable must not silence the log. This needs a process that has
// never parsed a valid environment (once parsed, the snapshot is kept), so the test has its own
// main: the shared one reads the environment first (tests/core/CMakeLists.txt).
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

std::size_t occurrences(std::string const& text, std::string const& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(logging, an_invalid_environment_falls_back_to_warn_and_is_reported_once) {
  ::setenv("GPUMEM_DEVICE_HEAP_SIZE", "lots", 1);
  ASSERT_THROW(gpumem::environment_snapshot(), gpumem::logic_error);  // never parsed: invalid now
  ::testing::internal::CaptureStderr();
  gpumem::log(gpumem::log_level::error, "double free of 0x1234");
  gpumem::log(gpumem::log_level::warn, "second message");
  gpumem::log(gpumem::log_level::info, "below warn");
  std::string const out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(out, "gpumem [error] double free of 0x1234"), 1u) << out;
  EXPECT_EQ(occurrences(out, "gpumem [warn] second message"), 1u) << out;
  EXPECT_EQ(occurrences(out, "below warn"), 0u) << out;
  EXPECT_EQ(occurrences(out, "'lots'"), 1u) << "the environment's error, once: " << out;
  EXPECT_EQ(occurrences(out, "GPUMEM_DEVICE_HEAP_SIZE"), 1u) << out;

  // Fixed, the environment's level applies again.
  ::unsetenv("GPUMEM_DEVICE_HEAP_SIZE");
  ::setenv("GPUMEM_LOG_LEVEL", "error", 1);
  gpumem::reload_environment();
  ::testing::internal::CaptureStderr();
  gpumem::log(gpumem::log_level::warn, "now below the level");
  gpumem::log(gpumem::log_level::error, "still printed");
  std::string const fixed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(fixed, "now below the level"), 0u) << fixed;
  EXPECT_EQ(occurrences(fixed, "still printed"), 1u) << fixed;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
