// Edge cases of the string functions that the CPython comparison does not reach: Python's
// ValueError cases, sizes past INT64_MAX (out_of_memory, never a wrapped size or a trap), int64
// extremes for start/end/width/count/step, and bytes that are not UTF-8. Each check runs in device
// code (one thread, nrt::launch) and records whether it held; the host names the failures.
#include <gpumem/array/device_array.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/memsys.hpp>
#include <gpumem/strings/functions.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace s = gpumem::strings;

namespace {

constexpr s::size_type max = INT64_MAX;
constexpr s::size_type min = INT64_MIN;

// What each check found: whether it held and the value it saw (for the message).
struct edge_record {
  int held;
  int error;
  std::int64_t value;
};

struct recorder {
  edge_record* out;
  int next = 0;
  GPUMEM_HD void check(bool held, s::errc error = s::errc::ok, std::int64_t value = 0) {
    out[next++] = {held ? 1 : 0, static_cast<int>(error), value};
  }
  GPUMEM_HD void string_is(s::udf_string const& r, s::string_view expected) {
    check(!r.failed() && r.view() == expected, r.error(), r.size_bytes());
  }
  GPUMEM_HD void fails_with(s::udf_string const& r, s::errc expected) {
    check(r.failed() && r.error() == expected && r.empty(), r.error(), r.size_bytes());
  }
  GPUMEM_HD void list_fails_with(s::string_list const& r, s::errc expected) {
    check(r.failed() && r.error() == expected && r.size() == 0, r.error(), r.size());
  }
};

// The names of the checks, in the order the kernel makes them.
char const* const check_names[] = {
    "split with an empty separator: value_error",
    "rsplit with an empty separator: value_error",
    "partition with an empty separator: value_error",
    "rpartition with an empty separator: value_error",
    "join of a failed list keeps its error",
    "repeat('ab', INT64_MAX): out_of_memory without allocating (the size passes INT64_MAX)",
    "repeat('', INT64_MAX): empty",
    "repeat('a', INT64_MIN): empty",
    "repeat('abc', 2^40): out_of_memory (the heap cannot hold 3 TiB)",
    "repeat('xyz', 5)",
    "slice step 0: value_error",
    "'abcdef'[INT64_MIN:INT64_MAX:INT64_MIN] is ''",
    "'abcdef'[INT64_MAX:INT64_MIN:INT64_MIN] is 'f'",
    "s[::INT64_MAX] is the first character",
    "s[::-1] reverses by characters",
    "s[INT64_MIN:INT64_MAX] view is all of s",
    "'abc'.find('', INT64_MAX) is -1",
    "'abc'.find('', INT64_MIN, INT64_MAX) is 0",
    "'abc'.count('', INT64_MIN, INT64_MAX) is 4",
    "'abcabc'.rfind('bc', INT64_MIN, INT64_MIN) is -1",
    "'abc'.startswith('', INT64_MAX) is false",
    "'abc'.endswith('c', INT64_MIN, INT64_MAX) is true",
    "index of a missing substring: value_error",
    "center('ab', INT64_MAX): out_of_memory",
    "ljust('ab', INT64_MAX, 'é'): out_of_memory (width * 2 bytes passes INT64_MAX)",
    "rjust('ab', INT64_MAX - 1): out_of_memory",
    "zfill('-1', INT64_MAX): out_of_memory",
    "center('ab', INT64_MIN) is 'ab'",
    "expandtabs('\\t\\t', INT64_MAX): out_of_memory (the size passes INT64_MAX)",
    "expandtabs('\\t', INT64_MAX): out_of_memory",
    "expandtabs('\\tx', INT64_MAX): out_of_memory (the character after the tab passes INT64_MAX)",
    "expandtabs('a\\tb', INT64_MIN) drops the tab",
    "replace('abc', '', 'x', INT64_MAX) is 'xaxbxcx'",
    "replace('abc', '', 'x', INT64_MIN) is 'xaxbxcx' (negative: all)",
    "at('abc', INT64_MIN): index_error",
    "at('abc', INT64_MAX): index_error",
    "at('aé中', -1) is '中'",
    "at('aé中', -3) is 'a'",
    "at('aé中', -4): index_error",
    "at('aé中', 1) is 'é'",
    "split('a,b,c', ',', INT64_MAX) has 3 parts",
    "split_whitespace(' a b ', INT64_MIN) has 2 parts (negative: no limit)",
    "rsplit('aabaaa', 'aa') is ['', 'ba', ''] (matched from the right)",
    "rstrip of a string ending in an invalid byte stops there",
    "strip of whitespace that is not ASCII (U+3000, U+0085)",
    "find of a 4-byte character gives a character index",
    "join of 1000 parts made once",
    "a view made with a negative byte count is empty (concat writes only the other part)",
    "s += s when s is full: the appended bytes are read before the old buffer is freed",
};
constexpr int check_count = static_cast<int>(sizeof check_names / sizeof check_names[0]);

struct edge_kernel {
  edge_record* out;
  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    if (t.global() != 0) return;
    recorder r{out};
    r.list_fails_with(s::split("a,b", ""), s::errc::value_error);
    r.list_fails_with(s::rsplit("a,b", ""), s::errc::value_error);
    s::partition_result const p = s::partition("a,b", "");
    r.check(p.error == s::errc::value_error && p.head.empty() && p.tail.empty(), p.error);
    s::partition_result const q = s::rpartition("a,b", "");
    r.check(q.error == s::errc::value_error, q.error);
    r.fails_with(s::join(",", s::split("abc", "")), s::errc::value_error);

    r.fails_with(s::repeat("ab", max), s::errc::out_of_memory);
    r.string_is(s::repeat("", max), "");
    r.string_is(s::repeat("a", min), "");
    r.fails_with(s::repeat("abc", s::size_type{1} << 40), s::errc::out_of_memory);
    r.string_is(s::repeat("xyz", 5), "xyzxyzxyzxyzxyz");

    r.fails_with(s::slice("abc", s::none, s::none, 0), s::errc::value_error);
    r.string_is(s::slice("abcdef", min, max, min), "");
    r.string_is(s::slice("abcdef", max, min, min), "f");
    r.string_is(s::slice("a\u00e9\u4e2d\U0001F600", s::none, s::none, max), "a");
    r.string_is(s::slice("a\u00e9\u4e2d\U0001F600", s::none, s::none, -1),
                "\U0001F600\u4e2d\u00e9a");
    s::string_view const whole = s::slice_view("a\u00e9\u4e2d", min, max);
    r.check(whole == s::string_view("a\u00e9\u4e2d"), s::errc::ok, whole.size_bytes());

    r.check(s::find("abc", "", max) == -1, s::errc::ok, s::find("abc", "", max));
    r.check(s::find("abc", "", min, max) == 0, s::errc::ok, s::find("abc", "", min, max));
    r.check(s::count("abc", "", min, max) == 4, s::errc::ok, s::count("abc", "", min, max));
    r.check(s::rfind("abcabc", "bc", min, min) == -1, s::errc::ok,
            s::rfind("abcabc", "bc", min, min));
    r.check(!s::startswith("abc", "", max));
    r.check(s::endswith("abc", "c", min, max));
    s::result<s::size_type> const missing = s::index("abc", "d");
    r.check(!missing.ok() && missing.error == s::errc::value_error, missing.error, missing.value);

    r.fails_with(s::center("ab", max), s::errc::out_of_memory);
    r.fails_with(s::ljust("ab", max, U'\u00e9'), s::errc::out_of_memory);
    r.fails_with(s::rjust("ab", max - 1), s::errc::out_of_memory);
    r.fails_with(s::zfill("-1", max), s::errc::out_of_memory);
    r.string_is(s::center("ab", min), "ab");
    r.fails_with(s::expandtabs("\t\t", max), s::errc::out_of_memory);
    r.fails_with(s::expandtabs("\t", max), s::errc::out_of_memory);
    r.fails_with(s::expandtabs("\tx", max), s::errc::out_of_memory);
    r.string_is(s::expandtabs("a\tb", min), "ab");
    r.string_is(s::replace("abc", "", "x", max), "xaxbxcx");
    r.string_is(s::replace("abc", "", "x", min), "xaxbxcx");

    s::result<s::string_view> const a1 = s::at("abc", min);
    r.check(a1.error == s::errc::index_error, a1.error);
    s::result<s::string_view> const a2 = s::at("abc", max);
    r.check(a2.error == s::errc::index_error, a2.error);
    s::result<s::string_view> const a3 = s::at("a\u00e9\u4e2d", -1);
    r.check(a3.ok() && a3.value == s::string_view("\u4e2d"), a3.error, a3.value.size_bytes());
    s::result<s::string_view> const a4 = s::at("a\u00e9\u4e2d", -3);
    r.check(a4.ok() && a4.value == s::string_view("a"), a4.error, a4.value.size_bytes());
    s::result<s::string_view> const a5 = s::at("a\u00e9\u4e2d", -4);
    r.check(a5.error == s::errc::index_error, a5.error);
    s::result<s::string_view> const a6 = s::at("a\u00e9\u4e2d", 1);
    r.check(a6.ok() && a6.value == s::string_view("\u00e9"), a6.error, a6.value.size_bytes());

    s::string_list const parts = s::split("a,b,c", ",", max);
    r.check(!parts.failed() && parts.size() == 3 && parts[2] == s::string_view("c"), parts.error(),
            parts.size());
    s::string_list const words = s::split_whitespace(" a b ", min);
    r.check(!words.failed() && words.size() == 2 && words[1] == s::string_view("b"), words.error(),
            words.size());
    s::string_list const right = s::rsplit("aabaaa", "aa");
    r.check(right.size() == 3 && right[0].empty() && right[1] == s::string_view("ba") &&
                right[2].empty(),
            right.error(), right.size());
    char const invalid[] = {'a', ' ', '\xff', ' ', ' '};
    s::string_view const stripped = s::rstrip(s::string_view(invalid, 5));
    r.check(stripped.size_bytes() == 3, s::errc::ok, stripped.size_bytes());
    s::string_view const wide = s::strip("\u3000\u0085 x\u3000");
    r.check(wide == s::string_view("x"), s::errc::ok, wide.size_bytes());
    r.check(s::find("a\U0001F600b", "b") == 2, s::errc::ok, s::find("a\U0001F600b", "b"));

    s::string_view many[1000];
    for (auto& v : many)
      v = "ab";
    s::udf_string const joined = s::join("-", many, 1000);
    r.check(!joined.failed() && joined.size_bytes() == 2999 && joined.capacity() >= 2999,
            joined.error(), joined.size_bytes());

    s::udf_string const glued = s::concat(s::string_view("abcdefgh", -5), "xy");
    r.string_is(glued, "xy");
    s::udf_string twice("0123456789abcdef");  // 16 bytes: capacity 16, full
    twice += twice.view();
    r.string_is(twice, "0123456789abcdef0123456789abcdef");
  }
};

}  // namespace

TEST(strings_functions, edge_cases) {
  gpumem::nrt::memsys ms(gpumem::nrt::heap_options{16 * gpumem::MiB},
                         gpumem::nrt::memsys_options{true});
  gpumem::device_array<edge_record> records({static_cast<std::size_t>(check_count) + 1});
  gpumem::nrt::launch(ms, {1, 1}, edge_kernel{records.data()});
  std::vector<edge_record> const got = records.copy_to_host();
  for (int k = 0; k < check_count; ++k)
    EXPECT_EQ(got[static_cast<std::size_t>(k)].held, 1)
        << check_names[k] << ": error "
        << s::errc_name(static_cast<s::errc>(got[static_cast<std::size_t>(k)].error)) << ", value "
        << got[static_cast<std::size_t>(k)].value;
  // The allocations that could not be served were recorded by the heap: check() reports them.
  EXPECT_THROW(ms.check(), gpumem::out_of_memory);
  gpumem::nrt::memsys_statistics const stats = ms.statistics();
  EXPECT_EQ(stats.alloc, stats.free) << "NRT_Allocate / NRT_Free unbalanced: a leak";
}
