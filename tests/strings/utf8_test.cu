// gpumem/strings/utf8.hpp: encode/decode round trips for every code point, and every 2-byte
// sequence, every 3-byte sequence with an E0..EF lead and the interesting 4-byte sequences
// against an independent reference of Python's strict decoder (overlong forms, surrogates, values
// past U+10FFFF, truncation), in a kernel and on the host; named cases; count_characters' word
// path against a byte loop.
#include "core_test_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/strings/utf8.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace utf8 = gpumem::strings::utf8;
using gpumem::strings::size_type;
using gpumem::test::strings::check_words;
using gpumem::test::strings::checker;
using gpumem::test::strings::device_array;
using gpumem::test::strings::failures;

namespace {

// The reference: a character is valid when its lead announces n bytes, n - 1 continuation bytes
// follow, the value needs n bytes (not overlong), is not a surrogate and is at most U+10FFFF
// (RFC 3629, which is what Python's strict decoder accepts). Returns n, or 0.
GPUMEM_HD int reference_decode(unsigned char const* p, int avail, char32_t& cp) {
  unsigned const b0 = p[0];
  int n = 0;
  char32_t v = 0;
  if (b0 < 0x80) {
    n = 1;
    v = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    v = b0 & 0x07;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  for (int i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i] & 0x3F);
  }
  char32_t const smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < smallest[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  cp = v;
  return n;
}

constexpr std::uint32_t code_points = 0x110000;
constexpr std::uint32_t two_byte = 1u << 16;
constexpr std::uint32_t three_byte = 16u << 16;  // leads E0..EF
constexpr std::uint32_t four_byte = 5u * 256 * 16;
constexpr std::uint32_t sweep_cases = code_points + two_byte + three_byte + four_byte;

// One case of the sweep: a code point, or a byte sequence.
struct utf8_sweep {
  checker check;
  GPUMEM_HD void run(std::uint32_t index) const {
    if (index < code_points) return code_point(static_cast<char32_t>(index));
    index -= code_points;
    unsigned char b[4] = {0, 0, 0, 0};
    int len;
    if (index < two_byte) {
      b[0] = static_cast<unsigned char>(index >> 8);
      b[1] = static_cast<unsigned char>(index);
      len = 2;
    } else if ((index -= two_byte) < three_byte) {
      b[0] = static_cast<unsigned char>(0xE0 + (index >> 16));
      b[1] = static_cast<unsigned char>(index >> 8);
      b[2] = static_cast<unsigned char>(index);
      len = 3;
    } else {
      index -= three_byte;
      unsigned char const edges[4] = {0x7F, 0x80, 0xBF, 0xC0};
      b[0] = static_cast<unsigned char>(0xF0 + index / (256 * 16));
      b[1] = static_cast<unsigned char>(index / 16 % 256);
      b[2] = edges[index / 4 % 4];
      b[3] = edges[index % 4];
      len = 4;
    }
    sequence(b, len);
  }

  GPUMEM_HD void code_point(char32_t cp) const {
    char buf[4] = {0, 0, 0, 0};
    int const n = utf8::encode(cp, buf);
    GPUMEM_CHECK(check, n == utf8::encoded_bytes(cp) || (cp >= 0xD800 && cp <= 0xDFFF));
    if (cp >= 0xD800 && cp <= 0xDFFF) {  // written as U+FFFD
      GPUMEM_CHECK(check, n == 3 && static_cast<unsigned char>(buf[0]) == 0xEF &&
                              static_cast<unsigned char>(buf[1]) == 0xBF &&
                              static_cast<unsigned char>(buf[2]) == 0xBD);
      return;
    }
    int const expected = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    GPUMEM_CHECK(check, n == expected);
    GPUMEM_CHECK(check, utf8::sequence_bytes(static_cast<unsigned char>(buf[0])) == n);
    char32_t back = 0;
    GPUMEM_CHECK(check, utf8::decode(buf, n, back) == n && back == cp);
    GPUMEM_CHECK(check, utf8::is_valid(buf, n));
    GPUMEM_CHECK(check, utf8::count_characters(buf, n) == 1);
    char32_t ref = 0;
    GPUMEM_CHECK(
        check,
        reference_decode(reinterpret_cast<unsigned char const*>(buf), n, ref) == n && ref == cp);
    for (int k = 1; k < n; ++k)  // truncated
      GPUMEM_CHECK(check, !utf8::is_valid(buf, k));
  }

  GPUMEM_HD void sequence(unsigned char const* b, int len) const {
    char const* p = reinterpret_cast<char const*>(b);
    bool valid = true;
    int chars = 0;
    for (int i = 0; i < len;) {
      char32_t rcp = 0;
      char32_t cp = 0;
      int const rn = reference_decode(b + i, len - i, rcp);
      int const n = utf8::decode(p + i, len - i, cp);
      if (rn > 0) {
        GPUMEM_CHECK(check, n == rn && cp == rcp);
        GPUMEM_CHECK(check, utf8::sequence_bytes(b[i]) == rn);
        i += rn;
      } else {
        GPUMEM_CHECK(check, n == 1 && cp == utf8::replacement_character);
        valid = false;
        i += 1;
      }
      ++chars;
    }
    GPUMEM_CHECK(check, utf8::is_valid(p, len) == valid);
    if (valid) GPUMEM_CHECK(check, utf8::count_characters(p, len) == chars);
  }

  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    std::uint64_t const i = t.global();
    if (i < sweep_cases) run(static_cast<std::uint32_t>(i));
  }
};

TEST(strings_utf8, sweep_on_the_host) {
  std::vector<unsigned> words(check_words, 0);
  utf8_sweep const sweep{checker{words.data()}};
  for (std::uint32_t i = 0; i < sweep_cases; ++i)
    sweep.run(i);
  EXPECT_EQ(failures(words), "");
}

TEST(strings_utf8, sweep_in_a_kernel) {
  device_array<unsigned> words(check_words);
  gpumem::launch({(sweep_cases + 255) / 256, 256}, utf8_sweep{checker{words.data()}});
  EXPECT_EQ(failures(words.to_host()), "");
}

// Named sequences, each with what Python's strict decoder says.
struct named_cases {
  checker check;
  GPUMEM_HD void run() const {
    struct sample {
      char bytes[8];
      int len;
      bool valid;
    };
    sample const samples[] = {
        {"", 0, true},
        {"a", 1, true},
        {"\xC3\xA9", 2, true},           // U+00E9
        {"\xE2\x82\xAC", 3, true},       // U+20AC
        {"\xF0\x9F\x98\x80", 4, true},   // U+1F600
        {"\xF4\x8F\xBF\xBF", 4, true},   // U+10FFFF
        {"\xEF\xBF\xBD", 3, true},       // U+FFFD itself
        {"\xED\x9F\xBF", 3, true},       // U+D7FF, the last before the surrogates
        {"\xEE\x80\x80", 3, true},       // U+E000, the first after
        {"\xC0\x80", 2, false},          // overlong NUL
        {"\xC1\xBF", 2, false},          // overlong
        {"\xE0\x80\x80", 3, false},      // overlong
        {"\xE0\x9F\xBF", 3, false},      // overlong U+07FF
        {"\xF0\x80\x80\x80", 4, false},  // overlong
        {"\xF0\x8F\xBF\xBF", 4, false},  // overlong U+FFFF
        {"\xED\xA0\x80", 3, false},      // U+D800
        {"\xED\xBF\xBF", 3, false},      // U+DFFF
        {"\xF4\x90\x80\x80", 4, false},  // U+110000
        {"\xF5\x80\x80\x80", 4, false},  // lead past F4
        {"\xFF", 1, false},
        {"\x80", 1, false},  // lone continuation
        {"a\xBF", 2, false},
        {"\xE2\x82", 2, false},      // truncated
        {"\xF0\x9F\x98", 3, false},  // truncated
        {"\xC3", 1, false},          // truncated
        {"\xC3\x28", 2, false},      // bad continuation
        {"\xE2\x28\xA1", 3, false},
        {"a\0b", 3, true},  // NUL is a character
    };
    for (sample const& s : samples)
      GPUMEM_CHECK(check, utf8::is_valid(s.bytes, s.len) == s.valid);
    char32_t cp = 1;
    GPUMEM_CHECK(check, utf8::decode("x", 0, cp) == 0 && cp == 0);
    // An invalid sequence consumes one byte: "\xE2\x82" then "a" decodes as FFFD, FFFD, 'a'.
    char const* bad =
        "\xE2\x82"
        "a";
    GPUMEM_CHECK(check, utf8::decode(bad, 3, cp) == 1 && cp == 0xFFFD);
    GPUMEM_CHECK(check, utf8::decode(bad + 1, 2, cp) == 1 && cp == 0xFFFD);
    GPUMEM_CHECK(check, utf8::decode(bad + 2, 1, cp) == 1 && cp == U'a');
    // Values past U+10FFFF are written as U+FFFD.
    char buf[4];
    GPUMEM_CHECK(check, utf8::encoded_bytes(0x110000) == 3 && utf8::encode(0x110000, buf) == 3 &&
                            utf8::decode(buf, 3, cp) == 3 && cp == 0xFFFD);
    GPUMEM_CHECK(check, utf8::encode(0xFFFFFFFF, buf) == 3);
    for (unsigned b = 0x80; b < 0xC2; ++b)
      GPUMEM_CHECK(check, utf8::sequence_bytes(static_cast<unsigned char>(b)) == 0);
    for (unsigned b = 0xF5; b < 0x100; ++b)
      GPUMEM_CHECK(check, utf8::sequence_bytes(static_cast<unsigned char>(b)) == 0);
    GPUMEM_CHECK(check, utf8::count_characters("abc", -1) == 0);
  }
  GPUMEM_HD void operator()(gpumem::thread_index const&) const { run(); }
};

TEST(strings_utf8, named_cases_on_the_host) {
  std::vector<unsigned> words(check_words, 0);
  named_cases{checker{words.data()}}.run();
  EXPECT_EQ(failures(words), "");
}

TEST(strings_utf8, named_cases_in_a_kernel) {
  device_array<unsigned> words(check_words);
  gpumem::launch({1, 1}, named_cases{checker{words.data()}});
  EXPECT_EQ(failures(words.to_host()), "");
}

// count_characters reads eight bytes a step: every start offset and length against a byte loop,
// over text mixing all four sequence lengths (and, for the word path, stray continuation bytes).
TEST(strings_utf8, count_characters_word_path_matches_a_byte_loop) {
  std::string text;
  for (int i = 0; i < 20; ++i)
    text += "ab\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80xyz\x80";
  for (std::size_t start = 0; start < 16; ++start) {
    for (std::size_t len = 0; start + len <= text.size(); ++len) {
      size_type expected = 0;
      for (std::size_t i = start; i < start + len; ++i)
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++expected;
      ASSERT_EQ(utf8::count_characters(text.data() + start, static_cast<size_type>(len)), expected)
          << "start " << start << " length " << len;
    }
  }
}

}  // namespace
