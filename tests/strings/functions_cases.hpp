// The cases of test_strings_functions as the host sees them: the operations (the kernel dispatches
// on op_code), a case parsed from a line of str_oracle.py's output, the parts of an answer as the
// kernel writes them (each an int64 length and its bytes), and the text of a case and of an answer
// for failure messages.
#pragma once

#include "functions_test_support.hpp"

#include <gpumem/strings/functions.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpumem::test::strings::cases {

enum op_code : int {
  op_find,
  op_rfind,
  op_count,
  op_index,
  op_rindex,
  op_startswith,
  op_endswith,
  op_startswith_tuple,
  op_endswith_tuple,
  op_contains,
  op_strip,
  op_lstrip,
  op_rstrip,
  op_split,
  op_rsplit,
  op_partition,
  op_rpartition,
  op_at,
  op_slice,
  op_concat,
  op_repeat,
  op_join,
  op_replace,
  op_zfill,
  op_center,
  op_ljust,
  op_rjust,
  op_expandtabs,
  op_len,
  op_compare,
  op_end
};

inline char const* const op_names[op_end] = {"find",
                                             "rfind",
                                             "count",
                                             "index",
                                             "rindex",
                                             "startswith",
                                             "endswith",
                                             "startswith_tuple",
                                             "endswith_tuple",
                                             "contains",
                                             "strip",
                                             "lstrip",
                                             "rstrip",
                                             "split",
                                             "rsplit",
                                             "partition",
                                             "rpartition",
                                             "at",
                                             "slice",
                                             "concat",
                                             "repeat",
                                             "join",
                                             "replace",
                                             "zfill",
                                             "center",
                                             "ljust",
                                             "rjust",
                                             "expandtabs",
                                             "len",
                                             "compare"};

constexpr int max_strings = 5;
constexpr int max_ints = 3;

// Outcomes that no Python error stands for; reported as their own names on the host.
constexpr int view_mismatch = 100;

// The oracle's case, as parsed on the host.
struct host_case {
  int op = op_end;
  std::vector<gpumem::test::strings::maybe_string> strings;
  std::vector<gpumem::test::strings::maybe_int> ints;
  std::string error;
  std::int64_t value = 0;
  std::vector<std::string> parts;
  std::string line;
};

inline bool parse_case(std::string const& line, std::map<std::string, int> const& ops,
                       host_case& out) {
  std::istringstream in(line);
  std::string word;
  std::size_t n = 0;
  if (!(in >> word) || ops.count(word) == 0) return false;
  out.op = ops.at(word);
  if (!(in >> n) || n > max_strings) return false;
  out.strings.resize(n);
  for (auto& str : out.strings)
    if (!(in >> word) || !gpumem::test::strings::decode_token(word, str)) return false;
  if (!(in >> n) || n > max_ints) return false;
  out.ints.resize(n);
  for (auto& i : out.ints)
    if (!(in >> word) || !gpumem::test::strings::decode_int(word, i)) return false;
  if (!(in >> word) || word != "=") return false;
  if (!(in >> out.error >> out.value >> n)) return false;
  out.parts.resize(n);
  for (auto& part : out.parts) {
    gpumem::test::strings::maybe_string p;
    if (!(in >> word) || !gpumem::test::strings::decode_token(word, p) || !p.given) return false;
    part = p.text;
  }
  out.line = line;
  return true;
}

inline std::string serialise(std::vector<std::string> const& parts) {
  std::string out;
  for (auto const& p : parts) {
    auto const n = static_cast<std::int64_t>(p.size());
    char len[8];
    std::memcpy(len, &n, 8);
    out.append(len, 8);
    out += p;
  }
  return out;
}

inline std::vector<std::string> deserialise(std::string const& bytes, std::int64_t parts) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::int64_t k = 0; k < parts && at + 8 <= bytes.size(); ++k) {
    std::int64_t n = 0;
    std::memcpy(&n, bytes.data() + at, 8);
    at += 8;
    if (n < 0 || at + static_cast<std::size_t>(n) > bytes.size()) break;
    out.push_back(bytes.substr(at, static_cast<std::size_t>(n)));
    at += static_cast<std::size_t>(n);
  }
  return out;
}

inline std::string describe(host_case const& c) {
  std::string text = std::string(op_names[c.op]) + "(";
  bool first = true;
  for (auto const& str : c.strings) {
    text += (first ? "" : ", ") +
            (str.given ? gpumem::test::strings::escape(str.text) : std::string("None"));
    first = false;
  }
  for (auto const& i : c.ints) {
    text += (first ? "" : ", ") + (i.given ? std::to_string(i.value) : std::string("None"));
    first = false;
  }
  return text + ")";
}

inline std::string show_answer(std::string const& error, std::int64_t value,
                               std::vector<std::string> const& parts) {
  std::string text = error == "ok" ? "value " + std::to_string(value) : error;
  if (!parts.empty()) {
    text += " [";
    for (std::size_t k = 0; k < parts.size(); ++k)
      text += (k ? ", " : "") + gpumem::test::strings::escape(parts[k]);
    text += "]";
  }
  return text;
}

inline std::string error_name(int code) {
  switch (code) {
    case static_cast<int>(gpumem::strings::errc::ok):
      return "ok";
    case static_cast<int>(gpumem::strings::errc::out_of_memory):
      return "out_of_memory";
    case static_cast<int>(gpumem::strings::errc::value_error):
      return "value_error";
    case static_cast<int>(gpumem::strings::errc::index_error):
      return "index_error";
    case static_cast<int>(gpumem::strings::errc::overflow_error):
      return "overflow_error";
    case view_mismatch:
      return "slice_view differs from slice";
  }
  return "error code " + std::to_string(code);
}

}  // namespace gpumem::test::strings::cases
