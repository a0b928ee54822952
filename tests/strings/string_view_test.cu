// gpumem/strings/string_view.hpp: length, iteration, byte_offset, char_at, substr and the
// comparisons, one set of checks run in a kernel (over a row in device memory, through
// string_element) and on the host.
#include "core_test_support.hpp"

#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/strings/string_view.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

using gpumem::string_element;
using gpumem::strings::npos;
using gpumem::strings::size_type;
using gpumem::strings::string_view;
using gpumem::test::strings::check_words;
using gpumem::test::strings::checker;
using gpumem::test::strings::device_array;
using gpumem::test::strings::failures;

static_assert(std::is_trivially_copyable_v<string_view>, "kernel arguments");
static_assert(std::is_trivially_copyable_v<string_view::const_iterator>);

namespace {

// "aß€😀b": characters of 1, 2, 3, 4 and 1 bytes.
char const mixed[] =
    "a\xC3\x9F\xE2\x82\xAC\xF0\x9F\x98\x80"
    "b";
constexpr size_type mixed_bytes = 11;
// 100 'x', then "é", then "yz": the ASCII fast path of advance() and a character after it.
constexpr size_type long_bytes = 104;

struct view_checks {
  checker check;
  string_element row;       // mixed, in memory of the side that runs the checks
  string_element long_row;  // the 104-byte string
  string_element copy_row;  // the same bytes as long_row, elsewhere

  GPUMEM_HD void run() const {
    string_view const s(row);
    GPUMEM_CHECK(check, s.size_bytes() == mixed_bytes && s.length() == 5 && !s.empty());
    GPUMEM_CHECK(check, s.data() == row.data);

    char32_t const chars[5] = {U'a', U'\u00DF', U'\u20AC', U'\U0001F600', U'b'};
    size_type const starts[6] = {0, 1, 3, 6, 10, 11};
    int i = 0;
    for (auto it = s.begin(); it != s.end(); ++it, ++i) {
      if (!GPUMEM_CHECK(check, i < 5)) return;
      GPUMEM_CHECK(check, *it == chars[i]);
      GPUMEM_CHECK(check, it.byte_position() == starts[i] && it.char_position() == i);
    }
    GPUMEM_CHECK(check, i == 5);
    GPUMEM_CHECK(check, s.end().byte_position() == mixed_bytes);
    i = 0;
    for (char32_t c : s)  // range-for
      GPUMEM_CHECK(check, c == chars[i++]);

    for (int k = 0; k <= 5; ++k)
      GPUMEM_CHECK(check, s.byte_offset(k) == starts[k]);
    GPUMEM_CHECK(check, s.byte_offset(-1) == 0 && s.byte_offset(6) == mixed_bytes &&
                            s.byte_offset(1000) == mixed_bytes);
    for (int k = 0; k < 5; ++k)
      GPUMEM_CHECK(check, s.char_at(k) == chars[k]);
    GPUMEM_CHECK(check, s.char_at(5) == 0 && s.char_at(-1) == 0);

    GPUMEM_CHECK(check, s.substr(1, 2) == string_view("\xC3\x9F\xE2\x82\xAC"));
    GPUMEM_CHECK(check, s.substr(3) == string_view("\xF0\x9F\x98\x80"
                                                   "b"));
    GPUMEM_CHECK(check, s.substr(3, npos).data() == row.data + 6);
    GPUMEM_CHECK(check, s.substr(0, 0).empty() && s.substr(0, 0).data() == row.data);
    GPUMEM_CHECK(check, s.substr(5, 3).empty() && s.substr(9, 3).empty());
    GPUMEM_CHECK(check, s.substr(-3, 2) == string_view("a\xC3\x9F"));
    GPUMEM_CHECK(check, s.substr(2, 100).size_bytes() == mixed_bytes - 3);
    GPUMEM_CHECK(check, s.substr(0, 5) == s && s.substr(0) == s);
    GPUMEM_CHECK(check, s.advance(1, 2) == 6 && s.advance(3, 0) == 3 && s.advance(6, 9) == 11);

    string_view const l(long_row);
    GPUMEM_CHECK(check, l.size_bytes() == long_bytes && l.length() == 103);
    GPUMEM_CHECK(check, l.byte_offset(37) == 37 && l.byte_offset(100) == 100);
    GPUMEM_CHECK(check, l.byte_offset(101) == 102 && l.byte_offset(103) == 104);
    GPUMEM_CHECK(check, l.char_at(100) == U'\u00E9' && l.char_at(101) == U'y');
    GPUMEM_CHECK(check, l.substr(99, 3) == string_view("x\xC3\xA9y"));
    GPUMEM_CHECK(check, l.advance(0, 8) == 8 && l.advance(96, 8) == 104 && l.advance(92, 8) == 100);

    // Equality and order: by bytes, across different addresses; code-point order.
    string_view const c(copy_row);
    GPUMEM_CHECK(check, c.data() != l.data() && c == l && !(c != l) && c.compare(l) == 0);
    GPUMEM_CHECK(check, c.substr(0, 102) != l && c.substr(0, 102) < l && l > c.substr(0, 102));
    GPUMEM_CHECK(check, l.substr(0, 50) == l.substr(1, 50) && l.substr(0, 101) != l.substr(1, 101));
    GPUMEM_CHECK(check, string_view("abc") < string_view("abd"));
    GPUMEM_CHECK(check, string_view("ab") < string_view("abc"));
    GPUMEM_CHECK(check, string_view("") < string_view("a"));
    GPUMEM_CHECK(check, string_view("b") > string_view("abc"));
    GPUMEM_CHECK(check, string_view("\xC3\xA9") > string_view("z"));  // é after z
    GPUMEM_CHECK(check, string_view("\x7F") < string_view("\xC2\x80"));
    GPUMEM_CHECK(check, string_view("\xEF\xBF\xBF") < string_view("\xF0\x90\x80\x80"));
    GPUMEM_CHECK(check, string_view("abc").compare("abd") < 0 && string_view("b").compare("a") > 0);
    GPUMEM_CHECK(check, string_view("abc") <= string_view("abc") &&
                            string_view("abc") >= string_view("abc"));
    GPUMEM_CHECK(check, !(string_view("abc") < string_view("abc")));
    GPUMEM_CHECK(check, s == "a\xC3\x9F\xE2\x82\xAC\xF0\x9F\x98\x80"
                             "b" &&
                            s != "a");

    // Construction.
    string_view const d;
    GPUMEM_CHECK(check,
                 d.empty() && d.length() == 0 && d.size_bytes() == 0 && d.begin() == d.end());
    GPUMEM_CHECK(check, d == string_view("") && d.substr(0, 3).empty() && d.byte_offset(2) == 0);
    GPUMEM_CHECK(check, string_view(static_cast<char const*>(nullptr)).empty());
    GPUMEM_CHECK(check, string_view("hello").size_bytes() == 5);
    GPUMEM_CHECK(check,
                 string_view("a\0b", 3).size_bytes() == 3 && string_view("a\0b", 3).length() == 3);
  }
  GPUMEM_HD void operator()(gpumem::thread_index const&) const { run(); }
};

std::string long_text() {
  return std::string(100, 'x') + "\xC3\xA9yz";
}

TEST(strings_string_view, on_the_host) {
  std::string const text = long_text();
  std::string const copy = text;
  std::vector<unsigned> words(check_words, 0);
  view_checks{checker{words.data()},
              {mixed, mixed_bytes},
              {text.data(), long_bytes},
              {copy.data(), long_bytes}}
      .run();
  EXPECT_EQ(failures(words), "");
}

TEST(strings_string_view, in_a_kernel_over_device_memory) {
  std::string const text = std::string(mixed, mixed_bytes) + long_text() + long_text();
  device_array<char> bytes(text.size());
  bytes.from_host(std::vector<char>(text.begin(), text.end()));
  device_array<unsigned> words(check_words);
  char const* p = bytes.data();
  gpumem::launch({1, 1}, view_checks{checker{words.data()},
                                     {p, mixed_bytes},
                                     {p + mixed_bytes, long_bytes},
                                     {p + mixed_bytes + long_bytes, long_bytes}});
  EXPECT_EQ(failures(words.to_host()), "");
}

}  // namespace
