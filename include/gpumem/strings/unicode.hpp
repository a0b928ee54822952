// gpumem/strings/unicode.hpp
//
// The code-point level of the string functions: what CPython's `str` methods see of one character.
// Every function is GPUMEM_HD (device code on the cuda backend, host code everywhere), allocates
// nothing and never fails; a value past U+10FFFF has no property and maps to itself.
//
//   is_alpha ... is_space        chr(c).isalpha() ... chr(c).isspace()
//   is_lower, is_upper           the per-character flags str.islower/str.isupper test (Unicode's
//                                Lowercase and Uppercase properties)
//   is_title                     general category Lt (str.istitle's titlecase flag)
//   is_cased, is_case_ignorable  the properties of the final-sigma rule: a capital sigma lowers to
//                                the final form when, passing over case-ignorable characters, a
//                                cased character comes before it and none comes after
//   decimal_value                0..9 for the digits int() and float() accept, else -1
//   to_upper ... casefold        the full mappings (1 to 3 code points: U+00DF -> "SS"); to_lower
//                                is str.lower() without the final-sigma rule, which needs context
//
// The tables come from CPython (scripts/gen-unicode-tables.py); version() names their Unicode
// version. Lookups are O(1): three table reads and a record, after an ASCII fast path.
//
// Device code cannot read host arrays, so the tables exist twice: the generated host copy (one
// inline variable for the whole program) and a __device__ copy initialised from it at compile time.
// The device copy is in an unnamed namespace because gpumem compiles CUDA code without relocatable
// device code: each translation unit is its own device module with its own copy. So each .cu file
// that includes this header carries the tables (about 24 KB) in its device code, and nvcc's host
// shadow of them: include it where string functions run, not everywhere.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/unicode_tables.hpp>

#include <cstdint>

namespace gpumem::strings::unicode {

// A full case mapping: cp[0..count) (count 1 to 3), the unused slots 0.
struct case_mapping {
  char32_t cp[3];
  int count;
};

inline constexpr char32_t max_code_point = 0x10FFFF;

namespace detail {

namespace {
#if defined(__CUDACC__)
__device__ constexpr unicode_tables device_unicode_tables = host_unicode_tables;
#endif
}  // namespace

GPUMEM_HD inline unicode_tables const& tables() {
#if GPUMEM_DEVICE_PASS
  return device_unicode_tables;
#else
  return host_unicode_tables;
#endif
}

GPUMEM_HD inline char_record const& record_of(char32_t c) {
  unicode_tables const& t = tables();
  if (c > max_code_point) return t.records[0];  // record 0: no property, no mapping
  constexpr std::uint32_t stage2_mask = (1u << stage2_shift) - 1;
  constexpr std::uint32_t stage3_mask = (1u << stage3_shift) - 1;
  std::uint32_t const block = t.stage1[c >> (stage2_shift + stage3_shift)];
  std::uint32_t const sub = t.stage2[(block << stage2_shift) | ((c >> stage3_shift) & stage2_mask)];
  return t.records[t.stage3[(sub << stage3_shift) | (c & stage3_mask)]];
}

enum class case_kind : unsigned { upper = 0, lower = 1, title = 2, fold = 3 };

// A case code is 2 * offset + multi: one code point c + offset, or the multi entry c + offset.
// The sums are unsigned: a negative offset wraps back into range.
GPUMEM_HD inline case_mapping map_case(char32_t c, case_kind kind) {
  unicode_tables const& t = tables();
  std::int32_t const code = t.case_codes[record_of(c).case_index[static_cast<unsigned>(kind)]];
  std::int32_t const multi = code & 1;
  char32_t const target = c + static_cast<char32_t>((code - multi) / 2);
  if (multi == 0) return {{target, 0, 0}, 1};
  multi_unit const* m = t.multi[target];
  return {{m[0], m[1], m[2]}, m[2] != 0 ? 3 : 2};
}

GPUMEM_HD inline bool ascii_lower(char32_t c) {
  return c - U'a' < 26u;
}
GPUMEM_HD inline bool ascii_upper(char32_t c) {
  return c - U'A' < 26u;
}
GPUMEM_HD inline bool ascii_digit(char32_t c) {
  return c - U'0' < 10u;
}

// Whether c has any of `flags`; below U+0080 the caller's `ascii` answer (no table read).
GPUMEM_HD inline bool flagged(char32_t c, bool ascii, std::uint16_t flags) {
  return c < 0x80 ? ascii : (record_of(c).flags & flags) != 0;
}

// The `kind` mapping of c; below U+0080 the caller's one-code-point `ascii` answer.
GPUMEM_HD inline case_mapping mapped(char32_t c, char32_t ascii, case_kind kind) {
  if (c < 0x80) return {{ascii, 0, 0}, 1};
  return map_case(c, kind);
}

}  // namespace detail

GPUMEM_HD inline char const* version() {
  return detail::unicode_version();
}

GPUMEM_HD inline bool is_alpha(char32_t c) {
  return detail::flagged(c, detail::ascii_lower(c | 0x20), detail::flag_alpha);
}

GPUMEM_HD inline bool is_decimal(char32_t c) {
  return detail::flagged(c, detail::ascii_digit(c), detail::flag_decimal);
}

GPUMEM_HD inline bool is_digit(char32_t c) {
  return detail::flagged(c, detail::ascii_digit(c), detail::flag_digit);
}

GPUMEM_HD inline bool is_numeric(char32_t c) {
  return detail::flagged(c, detail::ascii_digit(c), detail::flag_numeric);
}

// CPython: alpha, decimal, digit or numeric.
GPUMEM_HD inline bool is_alnum(char32_t c) {
  return detail::flagged(
      c, detail::ascii_lower(c | 0x20) || detail::ascii_digit(c),
      detail::flag_alpha | detail::flag_decimal | detail::flag_digit | detail::flag_numeric);
}

// In ASCII: \t \n \v \f \r, the separators U+001C..U+001F and the space.
GPUMEM_HD inline bool is_space(char32_t c) {
  return detail::flagged(c, c == U' ' || c - 0x09u < 5u || c - 0x1Cu < 4u, detail::flag_space);
}

GPUMEM_HD inline bool is_lower(char32_t c) {
  return detail::flagged(c, detail::ascii_lower(c), detail::flag_lower);
}

GPUMEM_HD inline bool is_upper(char32_t c) {
  return detail::flagged(c, detail::ascii_upper(c), detail::flag_upper);
}

GPUMEM_HD inline bool is_title(char32_t c) {
  return detail::flagged(c, false, detail::flag_title);
}

GPUMEM_HD inline bool is_cased(char32_t c) {
  return detail::flagged(c, detail::ascii_lower(c | 0x20), detail::flag_cased);
}

// Some ASCII punctuation is case-ignorable (the apostrophe, '.', ':', '^', '`'): no fast path.
GPUMEM_HD inline bool is_case_ignorable(char32_t c) {
  return (detail::record_of(c).flags & detail::flag_case_ignorable) != 0;
}

GPUMEM_HD inline int decimal_value(char32_t c) {
  if (c < 0x80) return detail::ascii_digit(c) ? static_cast<int>(c - U'0') : -1;
  std::uint16_t const flags = detail::record_of(c).flags;
  return (flags & detail::flag_decimal) != 0 ? flags >> detail::decimal_shift : -1;
}

GPUMEM_HD inline case_mapping to_upper(char32_t c) {
  return detail::mapped(c, detail::ascii_lower(c) ? c - 0x20 : c, detail::case_kind::upper);
}

// Without the final-sigma rule: U+03A3 maps to U+03C3 here; the string functions decide U+03C2.
GPUMEM_HD inline case_mapping to_lower(char32_t c) {
  return detail::mapped(c, detail::ascii_upper(c) ? c + 0x20 : c, detail::case_kind::lower);
}

GPUMEM_HD inline case_mapping to_title(char32_t c) {
  return detail::mapped(c, detail::ascii_lower(c) ? c - 0x20 : c, detail::case_kind::title);
}

GPUMEM_HD inline case_mapping casefold(char32_t c) {
  return detail::mapped(c, detail::ascii_upper(c) ? c + 0x20 : c, detail::case_kind::fold);
}

}  // namespace gpumem::strings::unicode
