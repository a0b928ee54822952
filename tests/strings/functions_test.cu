// The string functions (search, strip, split, combine, replace, slice, pad) against CPython: the
// oracle str_oracle.py generates thousands of cases with CPython's answers; one kernel
// (nrt::launch, a dispatch on the operation) evaluates them all on the device into preallocated
// buffers, and every answer is compared with CPython's. Compiled by nvcc in CUDA builds (a real
// kernel on a GPU) and as C++ in host-only builds (the same code on the host backend).
//
// The default seed's answers are committed (data/functions_cases.txt, made with CPython 3.11 by
// oracle_data.py), so this compares on every machine without Python. GPUMEM_STRINGS_TEST_SEED
// runs the oracle live with that seed instead (skipped where the local CPython's Unicode is not
// the tables'); a failure prints the seed, with the first mismatches: operation, inputs (escaped)
// and both answers.
#include "functions_cases.hpp"
#include "functions_test_support.hpp"

#include <gpumem/array/device_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/memsys.hpp>
#include <gpumem/strings/functions.hpp>
#include <gpumem/strings/unicode.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace s = gpumem::strings;
namespace t = gpumem::test::strings;

namespace {

using namespace gpumem::test::strings::cases;

// One case as the kernel reads it: strings as (offset, bytes) in one blob (bytes -1: None).
struct device_case {
  int op;
  int string_count;
  std::int64_t string_offset[max_strings];
  std::int64_t string_bytes[max_strings];
  std::int64_t ints[max_ints];
  int int_given[max_ints];
  std::int64_t out_offset;    // where its parts go in the output buffer
  std::int64_t out_capacity;  // room there (the expected size and some)
};

// What the kernel says: the integer value, the error, and the parts written to the output buffer
// as (8-byte length, bytes) each; `bytes` counts them all even past the capacity.
struct device_answer {
  std::int64_t value;
  std::int64_t parts;
  std::int64_t bytes;
  int error;
  int evaluated;
};

// Writes parts into a case's slot.
struct part_writer {
  char* out;
  std::int64_t capacity;
  std::int64_t used = 0;
  std::int64_t parts = 0;
  GPUMEM_HD void put_raw(char const* p, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i, ++used)
      if (used < capacity) out[used] = p[i];
  }
  GPUMEM_HD void part(s::string_view v) {
    std::int64_t const n = v.size_bytes();
    char len[8];
    std::memcpy(len, &n, 8);
    put_raw(len, 8);
    put_raw(v.data(), n);
    ++parts;
  }
};

GPUMEM_HD s::size_type int_or(device_case const& c, int i, s::size_type fallback) {
  return c.int_given[i] ? c.ints[i] : fallback;
}

GPUMEM_HD s::slice_bound bound(device_case const& c, int i) {
  return c.int_given[i] ? s::slice_bound(c.ints[i]) : s::none;
}

GPUMEM_HD void answer_string(s::udf_string const& r, part_writer& w, device_answer& a) {
  if (r.failed()) {
    a.error = static_cast<int>(r.error());
    return;
  }
  w.part(r.view());
}

GPUMEM_HD void answer_list(s::string_list const& list, part_writer& w, device_answer& a) {
  if (list.failed()) {
    a.error = static_cast<int>(list.error());
    return;
  }
  for (s::size_type i = 0; i < list.size(); ++i)
    w.part(list[i]);
}

GPUMEM_HD void answer_partition(s::partition_result const& p, part_writer& w, device_answer& a) {
  if (!p.ok()) {
    a.error = static_cast<int>(p.error);
    return;
  }
  w.part(p.head);
  w.part(p.sep);
  w.part(p.tail);
}

// The search family: find ... endswith_tuple, contains.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD void evaluate_search(device_case const& c,
                                                       s::string_view const* str,
                                                       device_answer& a) {
  s::size_type const start = int_or(c, 0, 0);
  s::size_type const end = int_or(c, 1, s::end_of_string);
  s::string_view const pair[2] = {str[1], str[2]};
  s::result<s::size_type> r;
  switch (c.op) {
    case op_find:
      a.value = s::find(str[0], str[1], start, end);
      break;
    case op_rfind:
      a.value = s::rfind(str[0], str[1], start, end);
      break;
    case op_count:
      a.value = s::count(str[0], str[1], start, end);
      break;
    case op_index:
    case op_rindex:
      r = c.op == op_index ? s::index(str[0], str[1], start, end)
                           : s::rindex(str[0], str[1], start, end);
      a.value = r.ok() ? r.value : 0;
      a.error = static_cast<int>(r.error);
      break;
    case op_startswith:
      a.value = s::startswith(str[0], str[1], start, end);
      break;
    case op_endswith:
      a.value = s::endswith(str[0], str[1], start, end);
      break;
    case op_startswith_tuple:
      a.value = s::startswith(str[0], pair, 2, start, end);
      break;
    case op_endswith_tuple:
      a.value = s::endswith(str[0], pair, 2, start, end);
      break;
    case op_contains:
      a.value = s::contains(str[0], str[1]);
      break;
    default:
      break;
  }
}

// Views and lists: strip, split, partition, at, slice.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD void evaluate_views(device_case const& c,
                                                      s::string_view const* str, bool const* given,
                                                      part_writer& w, device_answer& a) {
  switch (c.op) {
    case op_strip:
      w.part(given[1] ? s::strip(str[0], str[1]) : s::strip(str[0]));
      break;
    case op_lstrip:
      w.part(given[1] ? s::lstrip(str[0], str[1]) : s::lstrip(str[0]));
      break;
    case op_rstrip:
      w.part(given[1] ? s::rstrip(str[0], str[1]) : s::rstrip(str[0]));
      break;
    case op_split:
      answer_list(
          given[1] ? s::split(str[0], str[1], c.ints[0]) : s::split_whitespace(str[0], c.ints[0]),
          w, a);
      break;
    case op_rsplit:
      answer_list(
          given[1] ? s::rsplit(str[0], str[1], c.ints[0]) : s::rsplit_whitespace(str[0], c.ints[0]),
          w, a);
      break;
    case op_partition:
      answer_partition(s::partition(str[0], str[1]), w, a);
      break;
    case op_rpartition:
      answer_partition(s::rpartition(str[0], str[1]), w, a);
      break;
    case op_at: {
      s::result<s::string_view> const r = s::at(str[0], c.ints[0]);
      if (r.ok())
        w.part(r.value);
      else
        a.error = static_cast<int>(r.error);
      break;
    }
    case op_slice: {
      s::udf_string const r = s::slice(str[0], bound(c, 0), bound(c, 1), bound(c, 2));
      answer_string(r, w, a);
      // Where Python's step is 1, slice_view must say the same without new bytes.
      if (!c.int_given[2] || c.ints[2] == 1) {
        s::string_view const v = s::slice_view(str[0], bound(c, 0), bound(c, 1));
        if (!r.failed() && v != r.view()) a.error = view_mismatch;
      }
      break;
    }
    default:
      break;
  }
}

// New strings: concat, repeat, join, replace, zfill, center, ljust, rjust, expandtabs.
GPUMEM_STRINGS_NOINLINE GPUMEM_HD void evaluate_new(device_case const& c, s::string_view const* str,
                                                    bool const* given, part_writer& w,
                                                    device_answer& a) {
  char32_t fill = U' ';
  if (given[1] && !str[1].empty()) s::utf8::decode(str[1].data(), str[1].size_bytes(), fill);
  switch (c.op) {
    case op_concat:
      answer_string(str[0] + str[1], w, a);
      break;
    case op_repeat:
      answer_string(s::repeat(str[0], c.ints[0]), w, a);
      break;
    case op_join:
      answer_string(s::join(str[0], str + 1, c.string_count - 1), w, a);
      break;
    case op_replace:
      answer_string(s::replace(str[0], str[1], str[2], c.ints[0]), w, a);
      break;
    case op_zfill:
      answer_string(s::zfill(str[0], c.ints[0]), w, a);
      break;
    case op_center:
      answer_string(s::center(str[0], c.ints[0], fill), w, a);
      break;
    case op_ljust:
      answer_string(given[1] ? s::ljust(str[0], c.ints[0], fill) : s::ljust(str[0], c.ints[0]), w,
                    a);
      break;
    case op_rjust:
      answer_string(given[1] ? s::rjust(str[0], c.ints[0], fill) : s::rjust(str[0], c.ints[0]), w,
                    a);
      break;
    case op_expandtabs:
      answer_string(c.int_given[0] ? s::expandtabs(str[0], c.ints[0]) : s::expandtabs(str[0]), w,
                    a);
      break;
    default:
      break;
  }
}

struct evaluate_cases {
  device_case const* cases;
  device_answer* answers;
  std::size_t count;
  char const* blob;
  char* out;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    for (auto i = t.global(); i < count; i += t.total()) {
      device_case const& c = cases[i];
      s::string_view str[max_strings];
      bool given[max_strings] = {};
      for (int k = 0; k < c.string_count && k < max_strings; ++k) {
        given[k] = c.string_bytes[k] >= 0;
        if (given[k]) str[k] = s::string_view(blob + c.string_offset[k], c.string_bytes[k]);
      }
      device_answer a{};
      part_writer w{out + c.out_offset, c.out_capacity};
      if (c.op == op_len) {
        a.value = str[0].length();
      } else if (c.op == op_compare) {  // (a > b) - (a < b), and == and compare() agree with it
        int const by_operators = (str[0] > str[1]) - (str[0] < str[1]);
        int const by_compare = (str[0].compare(str[1]) > 0) - (str[0].compare(str[1]) < 0);
        bool const consistent =
            by_operators == by_compare && (str[0] == str[1]) == (by_operators == 0);
        a.value = consistent ? by_operators : 99;
      } else if (c.op <= op_contains) {
        evaluate_search(c, str, a);
      } else if (c.op <= op_slice)
        evaluate_views(c, str, given, w, a);
      else if (c.op < op_len)
        evaluate_new(c, str, given, w, a);
      a.parts = w.parts;
      a.bytes = w.used;
      a.evaluated = 1;
      answers[i] = a;
    }
  }
};

// The committed data: the default seed's first committed_case_count cases (tests/strings/
// oracle_data.py writes it with these numbers). A live run (GPUMEM_STRINGS_TEST_SEED) makes
// live_case_count cases.
constexpr long default_seed = 20261124;
constexpr int committed_case_count = 4000;
constexpr int live_case_count = 6000;

}  // namespace

TEST(strings_functions, cpython_agrees) {
  long seed = default_seed;
  int case_count = committed_case_count;
  t::oracle_output oracle;
  char const* const env = std::getenv("GPUMEM_STRINGS_TEST_SEED");
  bool const live = env != nullptr && *env != '\0';
  if (live) {
    t::oracle_output const version = t::run_oracle(GPUMEM_TEST_STR_ORACLE, "--version");
    if (!version.missing.empty()) GTEST_SKIP() << "no CPython to compare with: " << version.missing;
    ASSERT_TRUE(version.failure.empty()) << version.failure;
    std::string const python_unicode = t::oracle_version(version.text);
    if (python_unicode != s::unicode::version())
      GTEST_SKIP() << "CPython here has Unicode " << python_unicode
                   << ", gpumem's tables are Unicode " << s::unicode::version()
                   << ": whitespace and case would differ (without GPUMEM_STRINGS_TEST_SEED the "
                      "committed answers of the default seed compare anywhere)";
    seed = std::strtol(env, nullptr, 10);
    case_count = live_case_count;
    oracle = t::run_oracle(GPUMEM_TEST_STR_ORACLE,
                           std::to_string(seed) + " " + std::to_string(case_count));
    ASSERT_TRUE(oracle.missing.empty() && oracle.failure.empty())
        << oracle.missing << oracle.failure;
  } else {
    oracle = t::read_committed(GPUMEM_TEST_STR_DATA);
    ASSERT_TRUE(oracle.failure.empty()) << oracle.failure;
    ASSERT_TRUE(t::header_names_seed(oracle.header, std::to_string(default_seed)))
        << GPUMEM_TEST_STR_DATA << " is not the default seed's (" << default_seed
        << "): " << oracle.header << "\nregenerate it: " << t::regenerate_command;
    ASSERT_EQ(t::oracle_version(oracle.text), s::unicode::version())
        << GPUMEM_TEST_STR_DATA << " holds CPython's answers for another Unicode version than "
        << "the tables'; regenerate it: " << t::regenerate_command;
  }
  SCOPED_TRACE("GPUMEM_STRINGS_TEST_SEED=" + std::to_string(seed) +
               (live ? " (the oracle, live)" : " (the committed data)"));

  std::map<std::string, int> ops;
  for (int k = 0; k < op_end; ++k)
    ops[op_names[k]] = k;
  std::vector<host_case> cases;
  std::istringstream lines(oracle.text);
  std::string line;
  std::getline(lines, line);  // the version
  while (std::getline(lines, line)) {
    host_case c;
    ASSERT_TRUE(parse_case(line, ops, c)) << "cannot parse the oracle's line: " << line;
    cases.push_back(std::move(c));
  }
  ASSERT_EQ(cases.size(), static_cast<std::size_t>(case_count)) << "the oracle's data ended early";

  // The inputs in one blob; each case's output slot sized for CPython's answer and some more.
  std::string blob(1, '\0');
  std::vector<device_case> device_cases(cases.size());
  std::vector<std::string> expected(cases.size());
  std::int64_t out_bytes = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    device_case& d = device_cases[i];
    d = device_case{};
    d.op = cases[i].op;
    d.string_count = static_cast<int>(cases[i].strings.size());
    for (int k = 0; k < d.string_count; ++k) {
      t::maybe_string const& str = cases[i].strings[static_cast<std::size_t>(k)];
      d.string_offset[k] = static_cast<std::int64_t>(blob.size());
      d.string_bytes[k] = str.given ? static_cast<std::int64_t>(str.text.size()) : -1;
      blob += str.text;
    }
    for (std::size_t k = 0; k < cases[i].ints.size(); ++k) {
      d.ints[k] = cases[i].ints[k].value;
      d.int_given[k] = cases[i].ints[k].given ? 1 : 0;
    }
    expected[i] = serialise(cases[i].parts);
    d.out_offset = out_bytes;
    d.out_capacity = static_cast<std::int64_t>(expected[i].size()) + 64;
    out_bytes += d.out_capacity;
  }

  gpumem::nrt::memsys ms(gpumem::nrt::heap_options{64 * gpumem::MiB},
                         gpumem::nrt::memsys_options{true});
  auto const blob_device = gpumem::to_device(std::vector<char>(blob.begin(), blob.end()));
  auto const cases_device = gpumem::to_device(device_cases);
  gpumem::device_array<device_answer> answers_device({cases.size()});
  gpumem::device_array<char> out_device({static_cast<std::size_t>(out_bytes)});
  gpumem::nrt::launch(ms, {16, 128},
                      evaluate_cases{cases_device.data(), answers_device.data(), cases.size(),
                                     blob_device.data(), out_device.data()});
  std::vector<device_answer> const answers = answers_device.copy_to_host();
  std::vector<char> const out = out_device.copy_to_host();
  EXPECT_NO_THROW(ms.check());
  gpumem::nrt::memsys_statistics const stats = ms.statistics();
  EXPECT_EQ(stats.alloc, stats.free) << "NRT_Allocate / NRT_Free unbalanced: a leak";
  EXPECT_EQ(stats.mi_alloc, stats.mi_free);
  EXPECT_GT(stats.alloc, 1000u) << "the new strings should come from the NRT heap";

  std::size_t mismatches = 0;
  std::string report;
  std::vector<int> per_op(op_end, 0);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    host_case const& c = cases[i];
    device_answer const& a = answers[i];
    ++per_op[static_cast<std::size_t>(c.op)];
    std::string const got_error = error_name(a.error);
    bool const fits = a.bytes <= device_cases[i].out_capacity;
    std::string const got_bytes(out.data() + device_cases[i].out_offset,
                                static_cast<std::size_t>(fits ? a.bytes : 0));
    bool same = a.evaluated == 1 && got_error == c.error;
    if (same && c.error == "ok")
      same = a.value == c.value && a.parts == static_cast<std::int64_t>(c.parts.size()) && fits &&
             got_bytes == expected[i];
    if (same) continue;
    if (++mismatches <= 25)
      report += describe(c) + "\n    CPython: " + show_answer(c.error, c.value, c.parts) +
                "\n    gpumem:  " +
                (fits ? show_answer(got_error, a.value, deserialise(got_bytes, a.parts))
                      : got_error + ", " + std::to_string(a.bytes) + " bytes of parts") +
                "\n    oracle line: " + c.line.substr(0, 300) + "\n";
  }
  for (int k = 0; k < op_end; ++k)
    EXPECT_GT(per_op[static_cast<std::size_t>(k)], 20) << "too few cases of " << op_names[k];
  EXPECT_EQ(mismatches, 0u) << mismatches << " of " << cases.size()
                            << " cases differ from CPython (seed " << seed
                            << (live ? ", the oracle live" : ", the committed data")
                            << "); the first:\n"
                            << report;
}
