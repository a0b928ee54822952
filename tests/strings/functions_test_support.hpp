// Host helpers of the string-function tests: running the CPython oracle (str_oracle.py), decoding
// its tokens, and escaping strings for failure messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <sys/wait.h>

namespace gpumem::test::strings {

// The oracle's output; `missing` when there is no interpreter to run it (the test skips), or
// `failure` when it ran and failed (the test fails: a broken oracle must not pass as a skip).
struct oracle_output {
  std::string text;
  std::string missing;
  std::string failure;
};

inline oracle_output run_oracle(char const* script, std::string const& arguments) {
  oracle_output out;
  std::string const python = GPUMEM_TEST_PYTHON;
  if (python.empty()) {
    out.missing = "no python3 was found when the build was configured";
    return out;
  }
  std::string const command = "\"" + python + "\" \"" + script + "\" " + arguments;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    out.failure = "cannot start `" + command + "`";
    return out;
  }
  char buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;)
    out.text.append(buf, n);
  int const status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)  // the shell found no such command
    out.missing = python + " cannot be run here";
  else if (status != 0)
    out.failure = "`" + command + "` failed (status " + std::to_string(status) + ")";
  return out;
}

// The Unicode version of the oracle's first line ("version 14.0.0"); empty when it is not there.
inline std::string oracle_version(std::string const& text) {
  std::istringstream in(text);
  std::string word, version;
  if (!(in >> word >> version) || word != "version") return {};
  return version;
}

struct maybe_string {
  bool given = false;
  std::string text;
};

struct maybe_int {
  bool given = false;
  std::int64_t value = 0;
};

// "N" (None) or "x" followed by hex bytes.
inline bool decode_token(std::string const& token, maybe_string& out) {
  out = {};
  if (token == "N") return true;
  if (token.empty() || token[0] != 'x' || token.size() % 2 != 1) return false;
  out.given = true;
  for (std::size_t i = 1; i < token.size(); i += 2) {
    char const pair[3] = {token[i], token[i + 1], '\0'};
    char* end = nullptr;
    long const byte = std::strtol(pair, &end, 16);
    if (end != pair + 2) return false;
    out.text += static_cast<char>(byte);
  }
  return true;
}

inline bool decode_int(std::string const& token, maybe_int& out) {
  out = {};
  if (token == "N") return true;
  std::istringstream in(token);
  if (!(in >> out.value) || !in.eof()) return false;
  out.given = true;
  return true;
}

// Python-like quoting: printable ASCII as is, everything else as \xNN, \uNNNN or \UNNNNNNNN of
// its code point (bytes that do not decode as \xNN), so combining marks and spaces are visible.
inline std::string escape(std::string const& utf8) {
  std::string out = "'";
  char buf[16];
  for (std::size_t i = 0; i < utf8.size();) {
    auto const lead = static_cast<unsigned char>(utf8[i]);
    int n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (n == 0 || i + static_cast<std::size_t>(n) > utf8.size()) {
      std::snprintf(buf, sizeof buf, "\\x%02x", lead);
      out += buf;
      ++i;
      continue;
    }
    std::uint32_t cp = n == 1 ? lead : lead & (0x7Fu >> n);
    for (int k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + static_cast<std::size_t>(k)]) & 0x3Fu);
    if (cp >= 0x20 && cp < 0x7F && cp != '\\' && cp != '\'')
      out += static_cast<char>(cp);
    else if (cp < 0x100)
      std::snprintf(buf, sizeof buf, "\\x%02x", cp), out += buf;
    else if (cp < 0x10000)
      std::snprintf(buf, sizeof buf, "\\u%04x", cp), out += buf;
    else
      std::snprintf(buf, sizeof buf, "\\U%08x", cp), out += buf;
    i += static_cast<std::size_t>(n);
  }
  return out + "'";
}

}  // namespace gpumem::test::strings
