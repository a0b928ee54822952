// The one table of environment variables. To add a variable: add a field to
// gpumem::environment, a row to `table()` and a parse step to `parse()`; docs/environment.md
// lists the table for users.
#include <gpumem/core/detail/text.hpp>
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

namespace gpumem {

namespace {

// The statics below are never destroyed: log() reads the environment, and memory freed at exit
// (a user's global memory pointer, destroyed after these) may log.
std::vector<environment_variable> const& table() {
  static auto const* const rows = new std::vector<environment_variable>{
      {"GPUMEM_DEVICE", "(auto)", "name", "cuda, host",
       "Backend of the primitive layer; default cuda when a CUDA device is present, else host."},
      {"GPUMEM_MEMORY_MANAGER", "default", "name",
       "default, pool, async, host_only, or a path to a shared library",
       "Memory manager bound to each new context; a path loads a plugin library exporting "
       "gpumem_memory_manager_factory."},
      {"NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "10", "count",
       "a non-negative integer (as Python's int(): 20, +20, 2_0)",
       "The deferred-deallocation queue is flushed when it holds more than this many items."},
      {"NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", "0.2", "ratio",
       "a non-negative number (as Python's float(); above 1 leaves only the count limit)",
       "... or when its bytes exceed this fraction of the device's memory."},
      {"GPUMEM_HOST_DEVICE_CAPACITY", "4GiB", "bytes", "a byte count above 0, e.g. 512MiB",
       "Memory of the simulated device of the host backend (rounded up to the page size)."},
      {"GPUMEM_DEBUG_MEMORY", "0", "flag", "0, 1, false, true, off, on, no, yes",
       "Put the debug adaptor (double/wrong-size free detection, poisoning) around the device "
       "memory of every memory manager made afterwards, and check small frees on every device "
       "heap made afterwards."},
      {"GPUMEM_DEVICE_HEAP_SIZE", "256MiB", "bytes", "a byte count above 0, e.g. 1GiB",
       "Size of the device heap used by the device runtime (nrt/)."},
      {"GPUMEM_STRING_HEAP_FACTOR", "3", "ratio", "a number >= 0, e.g. 2.5",
       "strings::transform makes a heap of this many bytes per byte of input characters ..."},
      {"GPUMEM_STRING_HEAP_BYTES_PER_ROW", "128", "bytes", "a byte count, e.g. 256",
       "... plus this many bytes per input row (at least 16 MiB in all)."},
      {"GPUMEM_LOG_LEVEL", "warn", "name", "trace, debug, info, warn, error, off",
       "Lowest level the default log sink prints."},
      {"GPUMEM_SPILL", "0", "flag", "0, 1, false, true, off, on, no, yes",
       "Make a global spill manager: device buffers move to pinned host memory when needed."},
      {"GPUMEM_SPILL_ON_DEMAND", "1", "flag", "0, 1, false, true, off, on, no, yes",
       "The spill manager spills buffers when a device allocation runs out of memory."},
      {"GPUMEM_SPILL_DEVICE_LIMIT", "(none)", "bytes", "a byte count, e.g. 8GiB",
       "Soft limit on the device bytes of spillable buffers, kept by spilling."},
      {"GPUMEM_POOL_MAX_CACHED_SIZE", "256KiB", "bytes", "a byte count up to 4GiB, e.g. 4MiB",
       "Requests up to this size are cached per thread by the pool memory manager "
       "(pool_options::max_cached_size)."},
      {"GPUMEM_SPILL_STATS", "0", "count", "0, 1, 2",
       "Spill statistics: 0 none, 1 bytes and time spilled, 2 also every exposure."},
  };
  return *rows;
}

[[noreturn]] void invalid(char const* name, std::string const& value) {
  for (auto const& row : table()) {
    if (std::string(row.name) == name) {
      throw logic_error(std::string("invalid value '") + value + "' for environment variable " +
                        name + ": expected " + row.valid_values);
    }
  }
  throw logic_error(std::string("invalid value '") + value + "' for " + name);
}

std::optional<std::string> read(char const* name) {
  char const* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Numba reads its variables with Python's int() and float(), which take blanks on either side.
std::string without_blanks(std::string const& text) {
  return std::string(detail::trim_spaces(text));
}

// Python's int() of a non-negative decimal: an optional '+', digits with single underscores
// between them ("1_000").
std::size_t parse_count(char const* name, std::string const& text) {
  std::string digits = without_blanks(text);
  if (!digits.empty() && digits[0] == '+') digits.erase(0, 1);
  for (std::size_t at = digits.find('_'); at != std::string::npos; at = digits.find('_', at)) {
    if (at == 0 || at + 1 >= digits.size() || digits[at + 1] == '_') invalid(name, text);
    digits.erase(at, 1);
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    invalid(name, text);
  errno = 0;
  unsigned long long const value = std::strtoull(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) invalid(name, text);
  return static_cast<std::size_t>(value);
}

// Python's float() of a non-negative number (not C's hexadecimal form), single underscores
// between digits included ("0_5", "1_0.2_5", "1e1_0"), as int() takes them. Above 1 is allowed, as
// Numba allows it: the byte limit is then above the device's memory, and only the count flushes.
double parse_ratio(char const* name, std::string const& text) {
  std::string number = without_blanks(text);
  auto const digit = [&](std::size_t at) {
    return std::isdigit(static_cast<unsigned char>(number[at])) != 0;
  };
  for (std::size_t at = number.find('_'); at != std::string::npos; at = number.find('_', at)) {
    if (at == 0 || at + 1 >= number.size() || !digit(at - 1) || !digit(at + 1)) invalid(name, text);
    number.erase(at, 1);
  }
  char* end = nullptr;
  double const value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || std::isnan(value) || value < 0 ||
      number.find_first_of("xX") != std::string::npos)
    invalid(name, text);
  return value;
}

std::size_t parse_bytes(char const* name, std::string const& text) {
  auto const value = try_parse_bytes(text);
  if (!value) invalid(name, text);
  return *value;
}

// As the ratio (Python's float() of a non-negative number), and finite.
double parse_factor(char const* name, std::string const& text) {
  double const value = parse_ratio(name, text);
  if (!std::isfinite(value)) invalid(name, text);
  return value;
}

bool parse_flag(char const* name, std::string const& text) {
  if (text == "1" || text == "true" || text == "on" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "off" || text == "no" || text.empty()) return false;
  invalid(name, text);
}

std::string parse_choice(char const* name, std::string const& text,
                         std::initializer_list<char const*> choices) {
  for (char const* c : choices)
    if (text == c) return text;
  invalid(name, text);
}

environment parse() {
  environment env;
  if (auto v = read("GPUMEM_DEVICE"); v && !v->empty())
    env.device = parse_choice("GPUMEM_DEVICE", *v, {"cuda", "host"});
  if (auto v = read("GPUMEM_MEMORY_MANAGER")) env.memory_manager = *v;
  if (auto v = read("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT"))
    env.max_pending_deallocs_count = parse_count("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", *v);
  if (auto v = read("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO"))
    env.max_pending_deallocs_ratio = parse_ratio("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", *v);
  if (auto v = read("GPUMEM_HOST_DEVICE_CAPACITY")) {
    env.host_device_capacity = parse_bytes("GPUMEM_HOST_DEVICE_CAPACITY", *v);
    if (env.host_device_capacity == 0) invalid("GPUMEM_HOST_DEVICE_CAPACITY", *v);
  }
  if (auto v = read("GPUMEM_DEBUG_MEMORY"))
    env.debug_memory = parse_flag("GPUMEM_DEBUG_MEMORY", *v);
  if (auto v = read("GPUMEM_DEVICE_HEAP_SIZE")) {
    // 0 cannot be a heap's size: heap_options::bytes 0 means "this variable's", and a device_heap
    // made with it failed later with a message that named no variable.
    env.device_heap_size = parse_bytes("GPUMEM_DEVICE_HEAP_SIZE", *v);
    if (env.device_heap_size == 0) invalid("GPUMEM_DEVICE_HEAP_SIZE", *v);
  }
  if (auto v = read("GPUMEM_STRING_HEAP_FACTOR"))
    env.string_heap_factor = parse_factor("GPUMEM_STRING_HEAP_FACTOR", *v);
  if (auto v = read("GPUMEM_STRING_HEAP_BYTES_PER_ROW"))
    env.string_heap_bytes_per_row = parse_bytes("GPUMEM_STRING_HEAP_BYTES_PER_ROW", *v);
  if (auto v = read("GPUMEM_LOG_LEVEL"))
    env.log_level =
        parse_choice("GPUMEM_LOG_LEVEL", *v, {"trace", "debug", "info", "warn", "error", "off"});
  if (auto v = read("GPUMEM_SPILL")) env.spill = parse_flag("GPUMEM_SPILL", *v);
  if (auto v = read("GPUMEM_SPILL_ON_DEMAND"); v && !v->empty())
    env.spill_on_demand = parse_flag("GPUMEM_SPILL_ON_DEMAND", *v);
  if (auto v = read("GPUMEM_SPILL_DEVICE_LIMIT"); v && !v->empty()) {
    env.spill_device_limit = parse_bytes("GPUMEM_SPILL_DEVICE_LIMIT", *v);
    env.spill_device_limit_set = true;
  }
  if (auto v = read("GPUMEM_SPILL_STATS"); v && !v->empty())
    env.spill_stats = std::stoi(parse_choice("GPUMEM_SPILL_STATS", *v, {"0", "1", "2"}));
  if (auto v = read("GPUMEM_POOL_MAX_CACHED_SIZE"); v && !v->empty()) {
    env.pool_max_cached_size = parse_bytes("GPUMEM_POOL_MAX_CACHED_SIZE", *v);
    if (env.pool_max_cached_size > (std::size_t{4} << 30))
      invalid("GPUMEM_POOL_MAX_CACHED_SIZE", *v);
  }
  return env;
}

std::mutex& env_mutex() {
  static auto* const m = new std::mutex();
  return *m;
}
std::optional<environment>& cached() {
  static auto* const env = new std::optional<environment>();
  return *env;
}

}  // namespace

environment environment_snapshot() {
  std::lock_guard<std::mutex> lock(env_mutex());
  if (!cached()) cached() = parse();
  return *cached();
}

void reload_environment() {
  environment fresh = parse();
  std::lock_guard<std::mutex> lock(env_mutex());
  cached() = std::move(fresh);
}

std::vector<environment_variable> const& environment_table() {
  return table();
}

}  // namespace gpumem
