// Parsing of RMM-format allocation logs (see log_replay.hpp for the format); the replay is in
// log_replay.cpp.
#include <gpumem/core/detail/text.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/mr/log_replay.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <optional>
#include <string_view>

namespace gpumem {

char const* to_string(log_action action) noexcept {
  switch (action) {
    case log_action::allocate:
      return "allocate";
    case log_action::free:
      return "free";
    case log_action::allocate_failure:
      return "allocate failure";
  }
  return "?";
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    std::size_t const comma = line.find(',', start);
    fields.push_back(detail::trim_spaces(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

[[noreturn]] void bad_line(std::size_t line, std::string const& what) {
  throw logic_error("allocation log line " + std::to_string(line) + ": " + what);
}

// Text of the log quoted in a message: control bytes (a NUL would end the message where it is
// read as a C string) as \xNN, and at most 200 bytes of it.
std::string quoted(std::string_view text) {
  constexpr std::size_t most = 200;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < most; ++i) {
    auto const c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += text.size() > most ? "'..." : "'";
  return out;
}

// Digits alone (strtoull would also take blanks, a sign and, in base 16, another "0x").
std::optional<std::uint64_t> parse_unsigned(std::string_view text, int base) {
  if (text.empty()) return std::nullopt;
  std::string const s(text);
  char const* const digits = base == 16 ? "0123456789abcdefABCDEF" : "0123456789";
  if (s.find_first_not_of(digits) != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long const v = std::strtoull(s.c_str(), &end, base);
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

std::optional<std::uintptr_t> parse_address(std::string_view text) {
  std::string const t = lower(text);
  if (t.empty() || t == "(nil)" || t == "nil" || t == "null" || t == "0") return 0;
  std::string_view digits = t;
  if (digits.size() > 2 && digits[0] == '0' && digits[1] == 'x') digits.remove_prefix(2);
  auto v = parse_unsigned(digits, 16);
  if (!v) return std::nullopt;
  return static_cast<std::uintptr_t>(*v);
}

std::optional<double> parse_time(std::string_view text) {
  if (text.empty()) return 0.0;
  std::string const s(text);
  double seconds = 0;
  std::size_t pos = 0;
  int parts = 0;
  // "HH:MM:SS.ffffff" or plain seconds: fold the colon-separated fields in base 60. A field after a
  // colon (minutes, seconds) is below 60: "99:99:99.5" is no time of day.
  for (;;) {
    std::size_t const colon = s.find(':', pos);
    std::string const field = s.substr(pos, colon == std::string::npos ? colon : colon - pos);
    char* end = nullptr;
    double const v = std::strtod(field.c_str(), &end);
    // A time is a finite, non-negative decimal: not "nan", "inf", "1e999" or a hexadecimal float.
    if (field.empty() || end != field.c_str() + field.size() || !std::isfinite(v) || v < 0 ||
        field.find_first_of("xXnN") != std::string::npos || (parts > 0 && v >= 60))
      return std::nullopt;
    seconds = seconds * 60 + v;
    if (++parts > 3) return std::nullopt;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return seconds;
}

struct columns {
  std::optional<std::size_t> thread, time, stream;
  std::size_t action = 0, pointer = 0, size = 0;
  std::size_t needed = 0;  // fields a line must have
};

columns read_header(std::string_view line, std::size_t line_number) {
  auto const names = split(line);
  columns c;
  std::optional<std::size_t> action, pointer, size;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::string const n = lower(names[i]);
    if (n == "thread")
      c.thread = i;
    else if (n == "time")
      c.time = i;
    else if (n == "action")
      action = i;
    else if (n == "pointer")
      pointer = i;
    else if (n == "size")
      size = i;
    else if (n == "stream")
      c.stream = i;
  }
  if (!action || !pointer || !size)
    bad_line(line_number, "the header " + quoted(line) +
                              " lacks one of the columns Action, Pointer, Size "
                              "(expected Thread,Time,Action,Pointer,Size,Stream)");
  c.action = *action;
  c.pointer = *pointer;
  c.size = *size;
  c.needed = 1 + std::max({c.action, c.pointer, c.size, c.thread.value_or(0), c.time.value_or(0),
                           c.stream.value_or(0)});
  return c;
}

log_event read_event(std::string_view line, std::size_t line_number, columns const& c) {
  auto const fields = split(line);
  if (fields.size() < c.needed)
    bad_line(line_number, "expected at least " + std::to_string(c.needed) + " fields, got " +
                              std::to_string(fields.size()) + " in " + quoted(line));
  log_event e;
  e.line = line_number;
  std::string const action = lower(fields[c.action]);
  if (action == "allocate")
    e.action = log_action::allocate;
  else if (action == "free" || action == "deallocate")
    e.action = log_action::free;
  else if (action == "allocate failure")
    e.action = log_action::allocate_failure;
  else
    bad_line(line_number, "unknown action " + quoted(fields[c.action]) +
                              " (expected allocate, free or allocate failure)");
  auto const pointer = parse_address(fields[c.pointer]);
  if (!pointer) bad_line(line_number, "bad pointer " + quoted(fields[c.pointer]));
  e.pointer = *pointer;
  auto const size = parse_unsigned(fields[c.size], 10);
  if (!size) bad_line(line_number, "bad size " + quoted(fields[c.size]));
  e.size = static_cast<std::size_t>(*size);
  if (c.stream) {
    auto const stream = parse_address(fields[*c.stream]);
    if (!stream) bad_line(line_number, "bad stream " + quoted(fields[*c.stream]));
    e.stream = *stream;
  }
  if (c.thread) {
    std::string_view const t = fields[*c.thread];
    auto const id = parse_unsigned(t, 10);
    e.thread = id ? *id : std::hash<std::string_view>{}(t);
  }
  if (c.time) {
    auto const time = parse_time(fields[*c.time]);
    if (!time) bad_line(line_number, "bad time " + quoted(fields[*c.time]));
    e.time_seconds = *time;
  }
  return e;
}

}  // namespace

std::vector<log_event> parse_log(std::istream& in) {
  std::vector<log_event> events;
  std::optional<columns> header;
  std::string line;
  std::size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    std::string_view const text = detail::trim_spaces(line);
    if (text.empty()) continue;
    if (!header) {
      header = read_header(text, line_number);
      continue;
    }
    events.push_back(read_event(text, line_number, *header));
  }
  if (in.bad())
    throw logic_error("allocation log: read error after line " + std::to_string(line_number));
  if (!header) throw logic_error("allocation log: empty (no header line)");
  return events;
}

std::vector<log_event> parse_log_file(std::string const& path) {
  // A NUL would end the name where the file system reads it: another file would be opened (a
  // path from Python may hold one).
  GPUMEM_EXPECTS(path.find('\0') == std::string::npos,
                 "parse_log_file: the path " + quoted(path) + " holds a NUL byte");
  struct stat st {};
  GPUMEM_EXPECTS(::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode),
                 "parse_log_file: " + quoted(path) + " is a directory, not a log");
  std::ifstream in(path);
  GPUMEM_EXPECTS(in.is_open(), "parse_log_file: cannot open " + quoted(path));
  try {
    return parse_log(in);
  } catch (logic_error const& e) {  // the log's own error, with the path it came from
    throw logic_error(std::string(e.what()) + " (in " + quoted(path) + ")");
  }
}

}  // namespace gpumem
