// strings/case.hpp, predicates.hpp and convert.hpp against CPython: case_oracle.py prints a seeded
// set of cases with CPython's answers, one kernel evaluates them all (through nrt::launch: the
// results that are strings are udf_strings on the NRT heap, copied into preallocated buffers), and
// the host compares. The default seed's answers are committed (data/case_cases.txt, made with
// CPython 3.11 by oracle_data.py), so this compares on every machine without Python;
// GPUMEM_STRINGS_TEST_SEED runs the oracle live with that seed instead (skipped where the local
// CPython's Unicode is not the tables'). Also a set of known cases. Compiled by nvcc in CUDA
// builds, as C++ in host-only builds.
#include "functions_test_support.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/memsys.hpp>
#include <gpumem/strings/case.hpp>
#include <gpumem/strings/convert.hpp>
#include <gpumem/strings/predicates.hpp>
#include <gpumem/strings/unicode.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace strings = gpumem::strings;
namespace nrt = gpumem::nrt;
namespace t = gpumem::test::strings;

namespace {

// The operations, in the oracle's names.
char const* const op_names[] = {"upper",      "lower",    "casefold", "capitalize", "title",
                                "swapcase",   "is_alnum", "is_alpha", "is_decimal", "is_digit",
                                "is_numeric", "is_space", "is_lower", "is_upper",   "is_title",
                                "is_ascii",   "to_int",   "to_float", "from_int",   "from_float"};
enum op_code : int {
  op_upper,
  op_lower,
  op_casefold,
  op_capitalize,
  op_title,
  op_swapcase,
  op_is_alnum,
  op_is_alpha,
  op_is_decimal,
  op_is_digit,
  op_is_numeric,
  op_is_space,
  op_is_lower,
  op_is_upper,
  op_is_title,
  op_is_ascii,
  op_to_int,
  op_to_float,
  op_from_int,
  op_from_float,
  op_count
};

struct test_case {
  int op;
  int arg;                    // to_int's base
  std::int64_t input_offset;  // into the input bytes
  std::int64_t input_bytes;
  std::uint64_t number;        // from_int's int64 / from_float's double bits
  std::int64_t output_offset;  // into the output bytes
  std::int64_t output_capacity;
};

struct test_result {
  std::int64_t output_bytes;  // a string result: its size (it may exceed the capacity)
  std::uint64_t value;        // a predicate (0/1), to_int's int64, to_float's bits
  int error;                  // errc
};

GPUMEM_HD void store(strings::udf_string const& s, test_case const& c, char* outputs,
                     test_result& r) {
  r.error = static_cast<int>(s.error());
  r.output_bytes = s.size_bytes();
  std::int64_t const n = s.size_bytes() < c.output_capacity ? s.size_bytes() : c.output_capacity;
  for (std::int64_t i = 0; i < n; ++i)
    outputs[c.output_offset + i] = s.data()[i];
}

GPUMEM_HD void evaluate(test_case const& c, char const* inputs, char* outputs, test_result& r) {
  strings::string_view const s(inputs + c.input_offset, c.input_bytes);
  r = {};
  switch (c.op) {
    case op_upper:
      store(strings::upper(s), c, outputs, r);
      return;
    case op_lower:
      store(strings::lower(s), c, outputs, r);
      return;
    case op_casefold:
      store(strings::casefold(s), c, outputs, r);
      return;
    case op_capitalize:
      store(strings::capitalize(s), c, outputs, r);
      return;
    case op_title:
      store(strings::title(s), c, outputs, r);
      return;
    case op_swapcase:
      store(strings::swapcase(s), c, outputs, r);
      return;
    case op_is_alnum:
      r.value = strings::is_alnum(s);
      return;
    case op_is_alpha:
      r.value = strings::is_alpha(s);
      return;
    case op_is_decimal:
      r.value = strings::is_decimal(s);
      return;
    case op_is_digit:
      r.value = strings::is_digit(s);
      return;
    case op_is_numeric:
      r.value = strings::is_numeric(s);
      return;
    case op_is_space:
      r.value = strings::is_space(s);
      return;
    case op_is_lower:
      r.value = strings::is_lower(s);
      return;
    case op_is_upper:
      r.value = strings::is_upper(s);
      return;
    case op_is_title:
      r.value = strings::is_title(s);
      return;
    case op_is_ascii:
      r.value = strings::is_ascii(s);
      return;
    case op_to_int: {
      strings::result<std::int64_t> const v = strings::to_int(s, c.arg);
      r.value = static_cast<std::uint64_t>(v.value);
      r.error = static_cast<int>(v.error);
      return;
    }
    case op_to_float: {
      strings::result<double> const v = strings::to_float(s);
      std::memcpy(&r.value, &v.value, sizeof r.value);
      r.error = static_cast<int>(v.error);
      return;
    }
    case op_from_int:
      store(strings::from_int(static_cast<std::int64_t>(c.number)), c, outputs, r);
      return;
    case op_from_float: {
      double d;
      std::memcpy(&d, &c.number, sizeof d);
      store(strings::from_float(d), c, outputs, r);
      return;
    }
  }
  r.error = -1;
}

struct evaluate_cases {
  test_case const* cases;
  char const* inputs;
  char* outputs;
  test_result* results;
  std::size_t count;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    for (auto i = t.global(); i < count; i += t.total())
      evaluate(cases[i], inputs, outputs, results[i]);
  }
};

// A case and its expected answer, on the host.
struct expected_case {
  test_case c;
  std::string input;     // the string argument (from_int / from_float: the number's text)
  std::string expected;  // a string result, "0"/"1", or "ok:<v>" / an errc name
};

// The cases of one run, packed for the device.
class case_set {
 public:
  void add(int op, int arg, std::string input, std::uint64_t number, std::string expected) {
    expected_case e{};
    e.c.op = op;
    e.c.arg = arg;
    e.c.input_offset = static_cast<std::int64_t>(inputs_.size());
    e.c.input_bytes = static_cast<std::int64_t>(input.size());
    e.c.number = number;
    e.c.output_offset = static_cast<std::int64_t>(output_bytes_);
    e.c.output_capacity = 3 * e.c.input_bytes + 32;  // a case mapping at most triples the bytes
    output_bytes_ += static_cast<std::size_t>(e.c.output_capacity);
    inputs_ += input;
    e.input = std::move(input);
    e.expected = std::move(expected);
    cases_.push_back(std::move(e));
  }
  std::size_t size() const { return cases_.size(); }

  // Evaluates every case in one kernel; returns the differences from the expected answers (the
  // first `shown` in full) and checks that the NRT heap got every allocation back.
  std::size_t run(std::string& report, std::size_t shown = 20) {
    std::vector<test_case> host_cases;
    for (auto const& e : cases_)
      host_cases.push_back(e.c);
    std::vector<char> input_bytes(inputs_.begin(), inputs_.end());
    input_bytes.push_back('\0');
    auto const cases = gpumem::to_device(host_cases);
    auto const inputs = gpumem::to_device(input_bytes);
    gpumem::device_array<char> outputs({output_bytes_ + 1});
    gpumem::device_array<test_result> results({cases_.size()});

    nrt::memsys ms(nrt::heap_options{64 * gpumem::MiB}, nrt::memsys_options{true});
    nrt::launch(
        ms, {64, 128, nullptr},
        evaluate_cases{cases.data(), inputs.data(), outputs.data(), results.data(), cases_.size()});
    gpumem::backend().synchronize();
    ms.check();
    nrt::memsys_statistics const st = ms.statistics();
    EXPECT_TRUE(st.balanced()) << "NRT allocations " << st.alloc << ", frees " << st.free;
    EXPECT_GT(st.alloc, 0u);

    std::vector<char> const out = outputs.copy_to_host();
    std::vector<test_result> const res = results.copy_to_host();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      std::string const got = answer(cases_[i].c, res[i], out);
      if (got == cases_[i].expected) continue;
      if (++wrong <= shown)
        report += std::string(op_names[cases_[i].c.op]) + "(" + readable(cases_[i].input) +
                  (cases_[i].c.op == op_to_int ? ", " + std::to_string(cases_[i].c.arg) : "") +
                  "): expected " + readable(cases_[i].expected) + ", got " + readable(got) + "\n";
    }
    return wrong;
  }

 private:
  static std::string error_name(int e) {
    return e == 2 ? "value_error" : e == 4 ? "overflow_error" : "errc " + std::to_string(e);
  }
  static std::string answer(test_case const& c, test_result const& r,
                            std::vector<char> const& out) {
    char buf[32];
    switch (c.op) {
      case op_to_int:
        if (r.error != 0) return error_name(r.error);
        return "ok:" + std::to_string(static_cast<std::int64_t>(r.value));
      case op_to_float:
        if (r.error != 0) return error_name(r.error);
        std::snprintf(buf, sizeof buf, "ok:%016llx", static_cast<unsigned long long>(r.value));
        return buf;
      default:
        break;
    }
    if (c.op >= op_is_alnum && c.op <= op_is_ascii) return r.value != 0 ? "1" : "0";
    if (r.error != 0) return "failed string: " + error_name(r.error);
    if (r.output_bytes > c.output_capacity) return "a string longer than its buffer";
    return std::string(out.data() + c.output_offset, static_cast<std::size_t>(r.output_bytes));
  }
  // Printable ASCII as is, the rest as \xNN (bytes: readable whatever the terminal).
  static std::string readable(std::string const& s) {
    std::string out = "\"";
    for (unsigned char b : s) {
      if (b >= 0x20 && b < 0x7F && b != '\\' && b != '"') {
        out += static_cast<char>(b);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", b);
        out += buf;
      }
    }
    return out + "\"";
  }

  std::vector<expected_case> cases_;
  std::string inputs_;
  std::size_t output_bytes_ = 0;
};

int op_of(std::string const& name) {
  for (int i = 0; i < op_count; ++i)
    if (name == op_names[i]) return i;
  return -1;
}

std::string from_hex(std::string const& h) {
  std::string out;
  if (h == "-") return out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// The committed data is the default seed's, with committed_strings strings (case_oracle.py
// --count; oracle_data.py writes it with these numbers); a live run uses the oracle's default count
// (700 strings, about 20,000 cases). The number conversions scale with it.
constexpr char const* default_seed = "1";
constexpr std::size_t committed_strings = 120;
constexpr std::size_t live_strings = 700;

// How many cases case_oracle.py prints for `strings` strings (its cases()).
std::size_t oracle_case_count(std::size_t strings) {
  return strings * (6 + 10) + strings * 25 / 7 + strings * 5 + strings * 5 / 7 + strings * 25 / 7;
}

}  // namespace

TEST(strings_case_convert, matches_cpython) {
  char const* const seed_env = std::getenv("GPUMEM_STRINGS_TEST_SEED");
  bool const live = seed_env != nullptr && *seed_env != '\0';
  std::string const seed = live ? seed_env : default_seed;
  t::oracle_output oracle;
  if (live) {
    t::oracle_output const v = t::run_oracle(GPUMEM_TEST_CASE_ORACLE, "--version");
    if (!v.missing.empty()) GTEST_SKIP() << "no CPython to compare with: " << v.missing;
    ASSERT_TRUE(v.failure.empty()) << v.failure;
    std::string const version = t::oracle_version(v.text);
    ASSERT_FALSE(version.empty()) << "oracle output starts badly";
    if (version != strings::unicode::version())
      GTEST_SKIP() << "CPython here has Unicode " << version << ", gpumem's tables are Unicode "
                   << strings::unicode::version()
                   << ": the case mappings would differ (without GPUMEM_STRINGS_TEST_SEED the "
                      "committed answers of the default seed compare anywhere)";
    oracle = t::run_oracle(GPUMEM_TEST_CASE_ORACLE,
                           "--seed " + seed + " --count " + std::to_string(live_strings));
    ASSERT_TRUE(oracle.missing.empty() && oracle.failure.empty())
        << oracle.missing << oracle.failure;
  } else {
    oracle = t::read_committed(GPUMEM_TEST_CASE_DATA);
    ASSERT_TRUE(oracle.failure.empty()) << oracle.failure;
    ASSERT_TRUE(t::header_names_seed(oracle.header, default_seed))
        << GPUMEM_TEST_CASE_DATA << " is not the default seed's (" << default_seed
        << "): " << oracle.header << "\nregenerate it: " << t::regenerate_command;
  }

  std::istringstream in(oracle.text);
  std::string word, version;
  ASSERT_TRUE(in >> word >> version && word == "version") << "the oracle's output starts badly";
  ASSERT_EQ(version, strings::unicode::version())
      << "CPython's answers for another Unicode version than the tables'"
      << (live ? ""
               : std::string("; regenerate ") + GPUMEM_TEST_CASE_DATA + ": " +
                     t::regenerate_command);
  case_set set;
  std::string name, input, expected;
  int arg = 0;
  while (in >> name >> arg >> input >> expected) {
    int const op = op_of(name);
    ASSERT_GE(op, 0) << "unknown operation in the oracle's output: " << name;
    std::uint64_t number = 0;
    if (op == op_from_int) {
      number = static_cast<std::uint64_t>(std::stoll(input));
    } else if (op == op_from_float) {
      number = std::stoull(input, nullptr, 16);
    } else {
      input = from_hex(input);
    }
    if (expected != "value_error" && expected != "overflow_error" &&
        expected.rfind("ok:", 0) != 0 && !(op >= op_is_alnum && op <= op_is_ascii))
      expected = from_hex(expected);
    set.add(op, arg, input, number, expected);
  }
  ASSERT_EQ(set.size(), oracle_case_count(live ? live_strings : committed_strings))
      << "the oracle's output ended early";
  std::string report;
  std::size_t const wrong = set.run(report);
  EXPECT_EQ(wrong, 0u) << wrong << " of " << set.size() << " cases differ from CPython (seed "
                       << seed << (live ? ", the oracle live" : ", the committed data")
                       << "); the first:\n"
                       << report;
}

// Known answers (true in every CPython since 3.8), checked without Python.
TEST(strings_case_convert, known_cases) {
  case_set set;
  auto text = [&](int op, std::string in, std::string out) { set.add(op, 0, in, 0, out); };
  text(op_upper,
       "stra\xc3\x9f"
       "e",
       "STRASSE");
  text(op_upper, "\xef\xac\x83", "FFI");                                                   // U+FB03
  text(op_lower, "\xce\x9f\xce\x94\xce\x9f\xce\xa3", "\xce\xbf\xce\xb4\xce\xbf\xcf\x82");  // final
  text(op_lower, "\xce\xa3", "\xcf\x83");                  // a lone sigma is not final
  text(op_lower, "\xce\xa3\xce\x91", "\xcf\x83\xce\xb1");  // nor one before a letter
  text(op_lower, "A\xce\xa3'", "a\xcf\x82'");              // ignorable after it
  text(op_lower, "A\xce\xa3'b", "a\xcf\x83'b");
  text(op_lower, "\xc4\xb0", "i\xcc\x87");  // U+0130
  text(op_casefold,
       "Stra\xc3\x9f"
       "e",
       "strasse");
  text(op_capitalize, "\xc7\x86ungla", "\xc7\x85ungla");  // titlecase since 3.8
  text(op_capitalize, "hELLO wORLD", "Hello world");
  text(op_title, "they're bill's friends", "They'Re Bill'S Friends");
  text(op_title,
       "\xc3\x9f"
       "a",
       "Ssa");
  text(op_swapcase, "Hello \xc7\x85", "hELLO \xc7\x85");  // U+01C5 is neither
  text(op_swapcase, "A\xce\xa3", "a\xcf\x82");
  text(op_upper, "", "");
  auto pred = [&](int op, std::string in, bool v) { set.add(op, 0, in, 0, v ? "1" : "0"); };
  pred(op_is_ascii, "", true);
  pred(op_is_alpha, "", false);
  pred(op_is_space, "", false);
  pred(op_is_space, " \t\xc2\x85\xe3\x80\x80", true);
  pred(op_is_space, "\xe2\x80\x8b", false);  // zero width space
  pred(op_is_decimal,
       "\xd9\xa3"
       "7",
       true);
  pred(op_is_decimal, "\xc2\xb2", false);
  pred(op_is_digit, "\xc2\xb2", true);
  pred(op_is_numeric, "\xc2\xbd", true);
  pred(op_is_title, "Hello World", true);
  pred(op_is_title, "Hello world", false);
  pred(op_is_title, "\xc7\x85ungla", true);
  pred(op_is_title, "123", false);
  pred(op_is_lower, "abc1", true);
  pred(op_is_lower, "123", false);
  pred(op_is_upper, "\xc7\x85", false);
  pred(op_is_ascii, "\xc3\xa9", false);
  auto to_int = [&](std::string in, int base, std::string out) {
    set.add(op_to_int, base, in, 0, out);
  };
  to_int(" -42 ", 10, "ok:-42");
  to_int("0x_1F", 0, "ok:31");
  to_int("010", 0, "value_error");
  to_int("0_0", 0, "ok:0");
  to_int("1__0", 10, "value_error");
  to_int("\xd9\xa1\xd9\xa2", 10, "ok:12");
  to_int("zz", 36, "ok:1295");
  to_int("1", 1, "value_error");
  to_int("-9223372036854775808", 10, "ok:-9223372036854775808");
  to_int("9223372036854775808", 10, "overflow_error");
  auto to_float = [&](std::string in, std::string out) { set.add(op_to_float, 0, in, 0, out); };
  to_float("0.1", "ok:3fb999999999999a");
  to_float(" -Infinity\n", "ok:fff0000000000000");
  to_float("1_0.5", "ok:4025000000000000");
  to_float("1e400", "ok:7ff0000000000000");
  to_float("-0", "ok:8000000000000000");
  to_float("2.4703282292062328e-324", "ok:0000000000000001");  // just above the halfway point
  to_float("2.4703282292062327e-324", "ok:0000000000000000");  // just below it
  to_float("9007199254740993", "ok:4340000000000000");         // a tie: to even
  to_float("1e", "value_error");
  to_float("1._5", "value_error");
  to_float("0x10", "value_error");
  // A point without digits is no number, and inf or nan may not follow it (CPython 3.11's float()).
  for (char const* in : {".inf", "-.inf", ".nan", "+.infinity", " .NaN ", ".", "-.", "+.", "..5",
                         "inf.", "nan.", ".e3", ". 5"})
    to_float(in, "value_error");
  to_float(".5", "ok:3fe0000000000000");
  to_float("5.", "ok:4014000000000000");
  to_float("-.5e1", "ok:c014000000000000");
  to_float("5.e3", "ok:40b3880000000000");
  auto from_int = [&](std::int64_t v, std::string out) {
    set.add(op_from_int, 0, std::to_string(v), static_cast<std::uint64_t>(v), out);
  };
  from_int(0, "0");
  from_int(INT64_MIN, "-9223372036854775808");
  from_int(INT64_MAX, "9223372036854775807");
  auto from_float = [&](double d, std::string out) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    set.add(op_from_float, 0, out, bits, out);
  };
  from_float(0.1, "0.1");
  from_float(1e16, "1e+16");
  from_float(1e15, "1000000000000000.0");
  from_float(1e-5, "1e-05");
  from_float(0.0001, "0.0001");
  from_float(123.0, "123.0");
  from_float(-0.0, "-0.0");
  from_float(5e-324, "5e-324");
  from_float(1.7976931348623157e308, "1.7976931348623157e+308");
  from_float(1.0 / 3.0, "0.3333333333333333");
  from_float(-HUGE_VAL, "-inf");
  from_float(NAN, "nan");
  std::string report;
  std::size_t const wrong = set.run(report, 100);
  EXPECT_EQ(wrong, 0u) << report;
}
