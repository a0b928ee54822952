// gpumem/core/logging.hpp
//
// The logging sink. gpumem reports problems it must not throw from (an error while freeing one
// item of the deferred-deallocation queue, a failure inside a destructor) through this sink.
// The default sink writes "gpumem [level] message" to stderr for messages at or above the level
// given by GPUMEM_LOG_LEVEL (default warn), as the environment snapshot has it at each message
// (reload_environment() changes it). When the environment is invalid (any gpumem variable), the
// level is warn and the environment's error is printed once: an invalid variable never silences
// the log. Thread safe: the sink is called under a mutex. A message logged from inside a sink (by
// the sink itself, or by gpumem code it calls) goes to stderr rather than to the sink again; a sink
// must not call set_log_sink.
#pragma once

#include <functional>
#include <string_view>

namespace gpumem {

enum class log_level { trace, debug, info, warn, error, off };

using log_sink = std::function<void(log_level, std::string_view)>;

// Replaces the sink; returns the previous one. An empty sink restores the default.
log_sink set_log_sink(log_sink sink);

void log(log_level level, std::string_view message) noexcept;

char const* to_string(log_level level) noexcept;

}  // namespace gpumem
