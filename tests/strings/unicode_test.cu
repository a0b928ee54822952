// gpumem/strings/unicode.hpp: every function on every code point, against CPython (the oracle
// script unicode_oracle.py, run by the test) and, through gpumem::launch, on the device against
// the host. Compiled by nvcc in CUDA builds, so the .cuda variant reads the __device__ tables in a
// real kernel; as C++ in host-only builds.
#include <gpumem/array/device_array.hpp>
#include <gpumem/array/transfer.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/strings/unicode.hpp>

#include <gtest/gtest.h>

#include "oracle_runner.hpp"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace u = gpumem::strings::unicode;
using gpumem::test::strings::oracle_output;
using gpumem::test::strings::run_oracle;

namespace {

// The predicates in the flag order of unicode_oracle.py.
enum fact_bit : unsigned {
  bit_alpha,
  bit_decimal,
  bit_digit,
  bit_numeric,
  bit_alnum,
  bit_space,
  bit_lower,
  bit_upper,
  bit_title,
  bit_cased,
  bit_case_ignorable,
  bit_count
};
char const* const bit_names[bit_count] = {
    "is_alpha", "is_decimal", "is_digit", "is_numeric", "is_alnum",         "is_space",
    "is_lower", "is_upper",   "is_title", "is_cased",   "is_case_ignorable"};
char const* const mapping_names[4] = {"to_upper", "to_lower", "to_title", "casefold"};

// Everything the functions say of one code point.
struct facts {
  std::uint32_t flags;
  std::int32_t decimal;
  u::case_mapping mappings[4];
};

GPUMEM_HD facts facts_of(char32_t c) {
  bool const bits[bit_count] = {u::is_alpha(c),   u::is_decimal(c),       u::is_digit(c),
                                u::is_numeric(c), u::is_alnum(c),         u::is_space(c),
                                u::is_lower(c),   u::is_upper(c),         u::is_title(c),
                                u::is_cased(c),   u::is_case_ignorable(c)};
  facts f{};
  for (unsigned i = 0; i < bit_count; ++i)
    if (bits[i]) f.flags |= 1u << i;
  f.decimal = u::decimal_value(c);
  f.mappings[0] = u::to_upper(c);
  f.mappings[1] = u::to_lower(c);
  f.mappings[2] = u::to_title(c);
  f.mappings[3] = u::casefold(c);
  return f;
}

bool same(u::case_mapping const& a, u::case_mapping const& b) {
  return a.count == b.count && a.cp[0] == b.cp[0] && a.cp[1] == b.cp[1] && a.cp[2] == b.cp[2];
}

std::string hex(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return buf;
}

std::string show(u::case_mapping const& m) {
  std::string s = "[";
  for (int i = 0; i < m.count && i < 3; ++i)
    s += (i ? " " : "") + hex(m.cp[i]);
  return s + (m.count < 1 || m.count > 3 ? " count " + std::to_string(m.count) : "") + "]";
}

// Differences between two sets of facts per function: a count and the first few, readable.
class differences {
 public:
  void compare(char32_t c, facts const& expected, facts const& got) {
    for (unsigned i = 0; i < bit_count; ++i) {
      bool const e = (expected.flags >> i) & 1u, g = (got.flags >> i) & 1u;
      if (e != g) note(bit_names[i], c, e ? "true" : "false", g ? "true" : "false");
    }
    if (expected.decimal != got.decimal)
      note("decimal_value", c, std::to_string(expected.decimal), std::to_string(got.decimal));
    for (unsigned k = 0; k < 4; ++k)
      if (!same(expected.mappings[k], got.mappings[k]))
        note(mapping_names[k], c, show(expected.mappings[k]), show(got.mappings[k]));
  }
  std::size_t count() const { return count_; }
  std::string const& report() const { return report_; }

 private:
  void note(char const* what, char32_t c, std::string const& expected, std::string const& got) {
    if (++count_ <= 20)
      report_ +=
          std::string(what) + "(" + hex(c) + "): expected " + expected + ", got " + got + "\n";
  }
  std::size_t count_ = 0;
  std::string report_;
};

// One mapping field of the oracle: an offset ("+32", "-32", "0") or code points ("53.53").
bool parse_mapping(std::string const& field, char32_t c, u::case_mapping& m) {
  m = {};
  if (field.find('.') == std::string::npos) {
    m.cp[0] = c + static_cast<char32_t>(std::stol(field));
    m.count = 1;
    return true;
  }
  std::istringstream in(field);
  std::string part;
  while (std::getline(in, part, '.')) {
    if (m.count == 3) return false;
    m.cp[m.count++] = static_cast<char32_t>(std::stoul(part, nullptr, 16));
  }
  return m.count >= 2;
}

constexpr std::uint32_t code_point_count = u::max_code_point + 1;

}  // namespace

TEST(unicode_tables, every_code_point_matches_cpython) {
  // The version first (a fraction of a second): the full run takes seconds.
  oracle_output const oracle_version = run_oracle(GPUMEM_TEST_UNICODE_ORACLE, "--version");
  if (!oracle_version.missing.empty())
    GTEST_SKIP() << "no CPython to compare with: " << oracle_version.missing;
  ASSERT_TRUE(oracle_version.failure.empty()) << oracle_version.failure;
  std::istringstream version_line(oracle_version.text);
  std::string word, version;
  ASSERT_TRUE(version_line >> word >> version && word == "version") << "oracle output starts badly";
  if (version != u::version())
    GTEST_SKIP() << "CPython here has Unicode " << version << ", the tables were made from Unicode "
                 << u::version() << ": the comparison would report the versions' differences";

  oracle_output const oracle = run_oracle(GPUMEM_TEST_UNICODE_ORACLE, "");
  ASSERT_TRUE(oracle.missing.empty() && oracle.failure.empty()) << oracle.missing << oracle.failure;
  std::istringstream in(oracle.text);
  ASSERT_TRUE(in >> word >> version && version == u::version()) << "oracle output starts badly";

  differences diff;
  std::uint32_t next = 0;
  std::string first_hex, flags_hex, upper, lower, title, fold;
  std::uint32_t count = 0;
  std::int32_t decimal = 0;
  while (in >> first_hex >> count >> flags_hex >> decimal >> upper >> lower >> title >> fold) {
    auto const first = static_cast<std::uint32_t>(std::stoul(first_hex, nullptr, 16));
    ASSERT_EQ(first, next) << "oracle runs must cover every code point in order";
    for (std::uint32_t c = first; c < first + count; ++c) {
      facts expected{};
      expected.flags = static_cast<std::uint32_t>(std::stoul(flags_hex, nullptr, 16));
      expected.decimal = decimal;
      std::string const* fields[4] = {&upper, &lower, &title, &fold};
      for (unsigned k = 0; k < 4; ++k)
        ASSERT_TRUE(parse_mapping(*fields[k], c, expected.mappings[k]))
            << "bad mapping field " << *fields[k];
      diff.compare(c, expected, facts_of(c));
    }
    next = first + count;
  }
  ASSERT_EQ(next, code_point_count) << "the oracle stopped early";
  EXPECT_EQ(diff.count(), 0u) << diff.count() << " differences from CPython; the first:\n"
                              << diff.report();
}

namespace {

struct evaluate_code_points {
  facts* out;
  char32_t const* code_points;
  std::size_t count;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    for (auto i = t.global(); i < count; i += t.total())
      out[i] = facts_of(code_points[i]);
  }
};

}  // namespace

// Plane by plane (a few MiB of results at a time), then values past U+10FFFF.
TEST(unicode_tables, the_device_computes_what_the_host_computes) {
  std::vector<std::vector<char32_t>> batches;
  for (std::uint32_t plane = 0; plane < code_point_count; plane += 0x10000) {
    batches.emplace_back(0x10000);
    for (std::uint32_t i = 0; i < 0x10000; ++i)
      batches.back()[i] = plane + i;
  }
  batches.push_back({0x110000, 0x110041, 0x7FFFFFFF, 0x80000041, 0xFFFFFFFF});

  differences diff;
  std::size_t compared = 0;
  for (auto const& batch : batches) {
    auto const code_points = gpumem::to_device(batch);
    gpumem::device_array<facts> out({batch.size()});
    gpumem::launch({64, 256, nullptr},
                   evaluate_code_points{out.data(), code_points.data(), batch.size()});
    gpumem::backend().synchronize();
    std::vector<facts> const device = out.copy_to_host();
    for (std::size_t i = 0; i < batch.size(); ++i)
      diff.compare(batch[i], facts_of(batch[i]), device[i]);
    compared += batch.size();
  }
  EXPECT_EQ(compared, code_point_count + 5u);
  EXPECT_EQ(diff.count(), 0u) << diff.count() << " differences (expected: host, got: device):\n"
                              << diff.report();
}

// Facts that hold in every Unicode version CPython has used since 3.3, so that the functions are
// checked where the CPython comparison is skipped.
TEST(unicode_tables, known_characters) {
  auto expect_mapping = [](u::case_mapping m, std::vector<char32_t> const& cps, char const* what) {
    ASSERT_EQ(m.count, static_cast<int>(cps.size())) << what;
    for (std::size_t i = 0; i < cps.size(); ++i)
      EXPECT_EQ(m.cp[i], cps[i]) << what << " [" << i << "]";
    for (std::size_t i = cps.size(); i < 3; ++i)
      EXPECT_EQ(m.cp[i], 0u) << what << ": unused slots are 0";
  };
  expect_mapping(u::to_upper(U'\u00DF'), {U'S', U'S'}, "upper(sharp s)");
  expect_mapping(u::to_title(U'\u00DF'), {U'S', U's'}, "title(sharp s)");
  expect_mapping(u::casefold(U'\u00DF'), {U's', U's'}, "casefold(sharp s)");
  expect_mapping(u::to_lower(U'\u00DF'), {U'\u00DF'}, "lower(sharp s)");
  expect_mapping(u::to_upper(U'\u0149'), {U'\u02BC', U'N'}, "upper(n preceded by apostrophe)");
  expect_mapping(u::to_upper(U'\uFB03'), {U'F', U'F', U'I'}, "upper(ffi ligature)");
  expect_mapping(u::to_title(U'\uFB03'), {U'F', U'f', U'i'}, "title(ffi ligature)");
  expect_mapping(u::to_lower(U'\u0130'), {U'i', U'\u0307'}, "lower(I with dot above)");
  expect_mapping(u::to_upper(U'\u1F80'), {U'\u1F08', U'\u0399'}, "upper(alpha psili ypogeg.)");
  expect_mapping(u::to_title(U'\u1F80'), {U'\u1F88'}, "title(alpha psili ypogegrammeni)");
  expect_mapping(u::to_lower(U'\u03A3'), {U'\u03C3'}, "lower(capital sigma), no context");
  expect_mapping(u::casefold(U'\u03C2'), {U'\u03C3'}, "casefold(final sigma)");
  expect_mapping(u::to_upper(U'\u01C6'), {U'\u01C4'}, "upper(dz with caron)");
  expect_mapping(u::to_title(U'\u01C6'), {U'\u01C5'}, "title(dz with caron)");
  expect_mapping(u::to_upper(U'\U00010428'), {U'\U00010400'}, "upper(deseret long i)");
  expect_mapping(u::to_lower(U'\u212A'), {U'k'}, "lower(kelvin sign)");
  expect_mapping(u::to_upper(U'a'), {U'A'}, "upper(a)");
  expect_mapping(u::casefold(U'Z'), {U'z'}, "casefold(Z)");
  expect_mapping(u::to_upper(char32_t{0xD800}), {char32_t{0xD800}}, "a surrogate maps to itself");
  expect_mapping(u::to_lower(char32_t{0x110000}), {char32_t{0x110000}}, "past U+10FFFF");

  EXPECT_TRUE(u::is_title(U'\u01C5'));
  EXPECT_FALSE(u::is_upper(U'\u01C5'));
  EXPECT_TRUE(u::is_cased(U'\u01C5'));
  EXPECT_TRUE(u::is_lower(U'\u00AA'));  // feminine ordinal: Other_Lowercase, category Lo
  EXPECT_TRUE(u::is_alpha(U'\u00AA'));
  EXPECT_TRUE(u::is_cased(U'\u0345') && u::is_case_ignorable(U'\u0345'));  // both, and lowercase
  EXPECT_TRUE(u::is_case_ignorable(U'\'') && u::is_case_ignorable(U'.'));
  EXPECT_TRUE(u::is_case_ignorable(U':') && u::is_case_ignorable(U'^'));
  EXPECT_FALSE(u::is_case_ignorable(U'A') || u::is_case_ignorable(U' '));
  EXPECT_FALSE(u::is_cased(U'\u0300'));
  EXPECT_TRUE(u::is_case_ignorable(U'\u0300'));
  EXPECT_TRUE(u::is_upper(U'\u24B6'));  // circled A: Other_Uppercase, not alphabetic
  EXPECT_FALSE(u::is_alpha(U'\u24B6'));

  for (char32_t c : {0x09, 0x0A, 0x0B,   0x0C,   0x0D,   0x1C,   0x1D,   0x1E,   0x1F,   0x20,
                     0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000})
    EXPECT_TRUE(u::is_space(c)) << hex(c);
  for (char32_t c : {0x00, 0x08, 0x0E, 0x1B, 0x21, 0x200B, 0xFEFF, 0x180E})
    EXPECT_FALSE(u::is_space(c)) << hex(c);

  EXPECT_EQ(u::decimal_value(U'7'), 7);
  EXPECT_EQ(u::decimal_value(U'\u0663'), 3);      // Arabic-Indic three
  EXPECT_EQ(u::decimal_value(U'\uFF19'), 9);      // fullwidth nine
  EXPECT_EQ(u::decimal_value(U'\U0001D7CE'), 0);  // mathematical bold zero
  EXPECT_EQ(u::decimal_value(U'\u00B2'), -1);     // superscript two: a digit, not decimal
  EXPECT_TRUE(u::is_digit(U'\u00B2') && !u::is_decimal(U'\u00B2') && u::is_numeric(U'\u00B2'));
  EXPECT_TRUE(u::is_numeric(U'\u2155') && !u::is_digit(U'\u2155'));  // vulgar fraction 1/5
  EXPECT_TRUE(u::is_numeric(U'\u4E00') && !u::is_digit(U'\u4E00'));  // CJK one
  EXPECT_TRUE(u::is_alnum(U'\u4E00') && u::is_alnum(U'\u00B2') && u::is_alnum(U'x'));
  EXPECT_FALSE(u::is_alnum(U'_') || u::is_alnum(U'\u00B7'));
  EXPECT_EQ(u::decimal_value(U'a'), -1);

  for (char32_t c :
       {char32_t{0xD800}, char32_t{0xDFFF}, char32_t{0x110000}, char32_t{0xFFFFFFFF}}) {
    EXPECT_FALSE(u::is_alpha(c) || u::is_space(c) || u::is_cased(c) || u::is_case_ignorable(c) ||
                 u::is_numeric(c))
        << hex(c);
    EXPECT_EQ(u::decimal_value(c), -1) << hex(c);
  }
  EXPECT_STRNE(u::version(), "");
}
