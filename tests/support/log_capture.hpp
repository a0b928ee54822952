// Test support: collects what gpumem logs at error level for the life of a scope, then puts the
// previous sink back. Thread-safe: stream worker threads log too.
#pragma once

#include <gpumem/core/logging.hpp>

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumem::test {

class error_log_capture {
 public:
  error_log_capture()
      : previous_(set_log_sink([this](log_level level, std::string_view message) {
          if (level != log_level::error) return;
          std::lock_guard<std::mutex> lock(mutex_);
          errors_.emplace_back(message);
        })) {}
  ~error_log_capture() { set_log_sink(std::move(previous_)); }
  error_log_capture(error_log_capture const&) = delete;
  error_log_capture& operator=(error_log_capture const&) = delete;

  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> errors_;
  log_sink previous_;
};

}  // namespace gpumem::test
