// Host helpers of the strings tests that compare with CPython (test_strings_functions,
// test_strings_case): the committed oracle answers of the default seed (tests/strings/data, made by
// oracle_data.py), running an oracle live for another seed, decoding str_oracle.py's tokens, and
// escaping strings for failure messages.
#pragma once

#include "oracle_runner.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace gpumem::test::strings {

// The committed answers of the default seed. No Python is needed, so every machine compares;
// `failure` when the file cannot be read or does not start with its header line.
inline oracle_output read_committed(char const* path) {
  oracle_output out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.failure = std::string("cannot read the committed oracle data ") + path;
    return out;
  }
  std::ostringstream all;
  all << in.rdbuf();
  std::string const text = all.str();
  std::size_t const end = text.find('\n');
  if (text.empty() || text[0] != '#' || end == std::string::npos) {
    out.failure = std::string(path) + " does not start with its \"#\" header line";
    return out;
  }
  out.header = text.substr(0, end);
  out.text = text.substr(end + 1);
  return out;
}

// Where the committed data says it comes from: its header names `seed <seed>,` (so a changed
// default seed cannot compare with the old seed's file).
inline bool header_names_seed(std::string const& header, std::string const& seed) {
  return header.find(" seed " + seed + ",") != std::string::npos;
}

// The command that rewrites the committed data (a CPython whose Unicode is the tables').
inline constexpr char const* regenerate_command = "python3.11 tests/strings/oracle_data.py write";

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
