#include <gpumem/core/environment.hpp>
#include <gpumem/core/logging.hpp>

#include <cstdio>
#include <mutex>
#include <string>

namespace gpumem {

namespace {
std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
log_sink& current_sink() {
  static log_sink sink;
  return sink;
}
log_level threshold() {
  static log_level const level = [] {
    std::string const name = environment_snapshot().log_level;
    for (auto l : {log_level::trace, log_level::debug, log_level::info, log_level::warn,
                   log_level::error, log_level::off}) {
      if (name == to_string(l)) return l;
    }
    return log_level::warn;
  }();
  return level;
}
}  // namespace

char const* to_string(log_level level) noexcept {
  switch (level) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::off:
      return "off";
  }
  return "?";
}

log_sink set_log_sink(log_sink sink) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  log_sink previous = std::move(current_sink());
  current_sink() = std::move(sink);
  return previous;
}

void log(log_level level, std::string_view message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(sink_mutex());
    if (current_sink()) {
      current_sink()(level, message);
      return;
    }
    if (level < threshold() || level == log_level::off) return;
    std::fprintf(stderr, "gpumem [%s] %.*s\n", to_string(level), static_cast<int>(message.size()),
                 message.data());
  } catch (...) {
    // Logging must never throw (it is used from destructors and noexcept paths).
  }
}

}  // namespace gpumem
