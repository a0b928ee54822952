// make_strings_column: valid buffers of either offset width become columns; every kind of bad
// buffer is a logic_error naming the row and the value, and is caught before anything reads it.
#include "column_test_support.hpp"

#include <gpumem/column/null_mask.hpp>
#include <gpumem/column/strings_column.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace gpumem {
namespace {

using rows_type = std::vector<std::optional<std::string>>;

template <class Offset>
buffer offsets_of(std::vector<Offset> const& offsets) {
  return buffer::from_host(offsets.data(), offsets.size() * sizeof(Offset));
}

buffer chars_of(std::string const& chars) {
  return buffer::from_host(chars.data(), chars.size());
}

TEST(strings_validation, accepts_good_buffers_of_either_width) {
  std::string const chars = "xxdoyoucheese?";  // the first two bytes belong to no row
  column const narrow = make_strings_column(3, offsets_of<std::int32_t>({2, 4, 7, 14}),
                                            type_id::int32, chars_of(chars), {}, {}, true);
  EXPECT_EQ(narrow.to_host_strings(), (rows_type{"do", "you", "cheese?"}));
  column const wide =
      make_strings_column(3, offsets_of<std::int64_t>({2, 4, 4, 14}), type_id::int64,
                          chars_of(chars), null_mask_from_host({true, false, true}), 1);
  EXPECT_EQ(wide.null_count(), 1u);
  EXPECT_EQ(wide.to_host_strings(), (rows_type{"do", std::nullopt, "youcheese?"}));
  EXPECT_EQ(wide.slice(2, 3).to_host_strings(), (rows_type{"youcheese?"}));
  column const empty = make_strings_column(0, buffer(), type_id::int32, buffer());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_TRUE(empty.to_host_strings().empty());
}

TEST(strings_validation, offset_type_and_buffer_sizes) {
  test::expect_logic_error(
      [] {
        make_strings_column(1, offsets_of<float>({0, 1}), type_id::float32, chars_of("a"));
      },
      "strings column: offsets must be int32 or int64, not float32");
  test::expect_logic_error(
      [] {
        make_strings_column(3, offsets_of<std::int32_t>({0, 1}), type_id::int32, buffer());
      },
      "strings column: the offsets buffer has 8 bytes, 4 elements of 4 bytes need 16");
  test::expect_logic_error(
      [] {
        make_strings_column(1, offsets_of<std::int64_t>({0, 1, 2}).slice(4, 16), type_id::int64,
                            chars_of("ab"));
      },
      "the offsets buffer at address");
  test::expect_logic_error(
      [] {
        make_strings_column(std::numeric_limits<std::size_t>::max(), buffer(), type_id::int32,
                            buffer());
      },
      "need more offsets than the address space holds");
}

TEST(strings_validation, offsets_must_start_at_zero_or_above_and_never_decrease) {
  test::expect_logic_error(
      [] {
        make_strings_column(2, offsets_of<std::int32_t>({-1, 0, 1}), type_id::int32, chars_of("a"));
      },
      "strings column: offset of row 0 (-1) is negative");
  std::vector<std::int32_t> offsets{0, 5, 10, 15, 20, 25, 40, 12, 45, 50};
  test::expect_logic_error(
      [&] {
        make_strings_column(9, offsets_of(offsets), type_id::int32, chars_of(std::string(60, 'a')));
      },
      "strings column: offset of row 7 (12) is below that of row 6 (40)");
  test::expect_logic_error(
      [] {
        make_strings_column(2, offsets_of<std::int64_t>({0, 5, 3}), type_id::int64,
                            chars_of("abcdef"));
      },
      "strings column: end of row 1 (3) is below the offset of row 1 (5)");
  test::expect_logic_error(
      [] {
        make_strings_column(2, offsets_of<std::int32_t>({0, 5, 12}), type_id::int32,
                            chars_of("0123456789"));
      },
      "strings column: end of row 1 (12) is past the 10 bytes of characters");
  test::expect_logic_error(
      [] { make_strings_column(0, offsets_of<std::int32_t>({3}), type_id::int32, chars_of("ab")); },
      "strings column: the only offset (3) is past the 2 bytes of characters");
}

TEST(strings_validation, mask_and_null_count) {
  auto const offsets = offsets_of<std::int32_t>(std::vector<std::int32_t>(41, 0));
  test::expect_logic_error(
      [&] { make_strings_column(40, offsets, type_id::int32, buffer(), buffer(4)); },
      "strings column: the null mask has 4 bytes, 40 rows need 8");
  std::vector<bool> valid(40, true);
  valid[3] = valid[33] = false;
  test::expect_logic_error(
      [&] {
        make_strings_column(40, offsets, type_id::int32, buffer(), null_mask_from_host(valid), 3);
      },
      "strings column: null_count 3 given, the null mask has 2 null rows");
  test::expect_logic_error(
      [&] {
        make_strings_column(40, offsets, type_id::int32, buffer(), null_mask_from_host(valid), 41);
      },
      "strings column: null_count 41 is above the 40 rows");
  test::expect_logic_error(
      [&] { make_strings_column(40, offsets, type_id::int32, buffer(), buffer(), 1); },
      "strings column: null_count 1 without a null mask");
  column const c =
      make_strings_column(40, offsets, type_id::int32, buffer(), null_mask_from_host(valid), 2);
  EXPECT_EQ(c.null_count(), 2u);
  EXPECT_EQ(c.slice(4, 33).null_count(), 0u);
}

struct bad_utf8 {
  std::string bytes;
  int position;  // of the bad sequence within the row
  std::string reason;
};

TEST(strings_validation, utf8_when_asked) {
  bad_utf8 const cases[] = {
      {"ok\x80", 2, "0x80 cannot start a character"},
      {"\xc0\xaf", 0, "0xc0 cannot start a character"},  // an overlong '/'
      {"ab\xe2\x82", 2, "0xe2 starts a 3-byte sequence cut short by the end"},
      {"\xe0\x80\xaf", 0, "0xe0 is followed by 0x80 at its byte 2 (0xa0..0xbf expected)"},
      {"\xed\xa0\x80", 0, "0xed is followed by 0xa0 at its byte 2 (0x80..0x9f expected)"},
      {"\xf4\x90\x80\x80", 0, "0xf4 is followed by 0x90 at its byte 2 (0x80..0x8f expected)"},
      {"\xf5\x80\x80\x80", 0, "0xf5 cannot start a character"},
      {"x\xc3\x28", 1, "0xc3 is followed by 0x28 at its byte 2 (0x80..0xbf expected)"},
      {"\xe2\x82\xac\xf0\x9f\x99", 3, "0xf0 starts a 4-byte sequence cut short by the end"},
  };
  for (bad_utf8 const& bad : cases) {
    std::string const chars = "fine" + bad.bytes + "\xc3\xa9t\xc3\xa9";
    auto const n = static_cast<std::int32_t>(bad.bytes.size());
    auto offsets = offsets_of<std::int32_t>({0, 4, 4 + n, 4 + n + 5});
    test::expect_logic_error(
        [&] { make_strings_column(3, offsets, type_id::int32, chars_of(chars), {}, {}, true); },
        "strings column: row 1 is not valid UTF-8: at byte " + std::to_string(bad.position) +
            " of the row, " + bad.reason);
    // Not asked: the same bytes are accepted (the offsets are still checked).
    column const unchecked = make_strings_column(3, offsets, type_id::int32, chars_of(chars));
    EXPECT_EQ(unchecked.to_host_strings()[1], bad.bytes);
    // A null row's bytes are not checked.
    column const nulled = make_strings_column(3, offsets, type_id::int32, chars_of(chars),
                                              null_mask_from_host({true, false, true}), 1, true);
    EXPECT_EQ(nulled.to_host_strings()[2], "\xc3\xa9t\xc3\xa9");
  }
  std::string const good =
      "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
      "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";  // the edges of each range
  auto const n = static_cast<std::int32_t>(good.size());
  column const c = make_strings_column(1, offsets_of<std::int32_t>({0, n}), type_id::int32,
                                       chars_of(good), {}, {}, true);
  EXPECT_EQ(c.to_host_strings()[0], good);
}

}  // namespace
}  // namespace gpumem
