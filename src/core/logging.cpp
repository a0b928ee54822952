#include <gpumem/core/environment.hpp>
#include <gpumem/core/logging.hpp>

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>

namespace gpumem {

namespace {
// Never destroyed (nor is anything below): memory freed at exit, after every function-local
// static of gpumem, may still log.
std::mutex& sink_mutex() {
  static auto* const m = new std::mutex();
  return *m;
}
log_sink& current_sink() {
  static auto* const sink = new log_sink();
  return *sink;
}
// The default sink's level, from GPUMEM_LOG_LEVEL as the environment snapshot has it now: read at
// every message the default sink gets, so that reload_environment() changes it (the snapshot is
// parsed once and cached; messages are rare). An invalid environment (any variable, not only
// GPUMEM_LOG_LEVEL) must not silence the log, errors included: the level falls back to warn, and
// the environment's error is printed once (again only when it changes). Called under sink_mutex().
log_level threshold() {
  static auto& reported = *new std::string();  // the environment error printed last
  try {
    std::string const name = environment_snapshot().log_level;
    reported.clear();
    for (auto l : {log_level::trace, log_level::debug, log_level::info, log_level::warn,
                   log_level::error, log_level::off}) {
      if (name == to_string(l)) return l;
    }
  } catch (std::exception const& e) {
    if (reported != e.what()) {
      reported = e.what();
      std::fprintf(stderr, "gpumem [error] %s (logging at level warn)\n", e.what());
    }
  }
  return log_level::warn;
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
  // Set while this thread runs a user's sink: a message the sink logs itself (directly, or by
  // freeing memory whose release logs) would take sink_mutex() again and deadlock. It goes to
  // stderr instead, unfiltered (the level needs the environment, which may be what failed).
  thread_local bool in_sink = false;
  try {
    if (in_sink) {
      if (level != log_level::off)
        std::fprintf(stderr, "gpumem [%s] %.*s\n", to_string(level),
                     static_cast<int>(message.size()), message.data());
      return;
    }
    std::lock_guard<std::mutex> lock(sink_mutex());
    if (current_sink()) {
      struct sink_scope {
        sink_scope() { in_sink = true; }
        ~sink_scope() { in_sink = false; }
      } const scope;
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
