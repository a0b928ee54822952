// Running a CPython oracle script of the strings tests (unicode_oracle.py, str_oracle.py,
// case_oracle.py) with the interpreter the build found (GPUMEM_TEST_PYTHON, which the including
// test target defines), and reading the Unicode version it prints first. Host only.
//
//   oracle_output const out = run_oracle(GPUMEM_TEST_STR_ORACLE, "--version");
//   if (!out.missing.empty()) GTEST_SKIP() << out.missing;
//   ASSERT_TRUE(out.failure.empty()) << out.failure;
//   std::string const version = oracle_version(out.text);
//
// Errors are reported in the result, never thrown.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <sys/wait.h>

namespace gpumem::test::strings {

// The oracle's output; `missing` when there is no interpreter to run it (the test skips), or
// `failure` when it ran and failed (the test fails: a broken oracle must not pass as a skip).
// From a committed file (functions_test_support.hpp's read_committed), `header` is its first line
// ("# ... seed N, CPython's Unicode V ...") and `text` the rest, which is what the oracle printed.
struct oracle_output {
  std::string text;
  std::string missing;
  std::string failure;
  std::string header;
};

// Runs `script arguments` with the configured interpreter and collects what it prints.
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

}  // namespace gpumem::test::strings
