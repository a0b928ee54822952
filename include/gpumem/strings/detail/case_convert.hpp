// gpumem/strings/detail/case_convert.hpp — not API: the one loop behind strings/case.hpp.
//
// convert_case(s, op) walks the code points once, maps each with unicode.hpp's full mappings, and
// writes the UTF-8 through a small local buffer into one udf_string (reserved at the input's size:
// doubling when a mapping grows the string). A pure-ASCII input takes a byte loop with no table
// read. The final-sigma context (CPython's handle_capital_sigma) is looked up only at a capital
// sigma: backwards and forwards over case-ignorable characters. Each run of case-ignorable
// characters is bounded by non-ignorable ones (a sigma is one), so the whole call stays linear.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/udf_string.hpp>
#include <gpumem/strings/unicode.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings::detail {

enum class case_operation { upper, lower, casefold, capitalize, title, swapcase };

// Collects UTF-8 in a local buffer and appends it to `out` in pieces.
class case_writer {
 public:
  GPUMEM_HD explicit case_writer(udf_string& out) : out_(out) {}
  GPUMEM_HD void put(char32_t c) {
    if (used_ > capacity - 4) flush();
    used_ += utf8::encode(c, buffer_ + used_);
  }
  GPUMEM_HD void put_ascii(char c) {
    if (used_ == capacity) flush();
    buffer_[used_++] = c;
  }
  GPUMEM_HD void put(unicode::case_mapping const& m) {
    for (int k = 0; k < m.count; ++k)
      put(m.cp[k]);
  }
  GPUMEM_HD void flush() {
    if (used_ > 0) out_.append(buffer_, used_);
    used_ = 0;
  }

 private:
  static constexpr int capacity = 64;
  udf_string& out_;
  char buffer_[capacity];
  int used_ = 0;
};

// The code point that ends just before byte `end` (end > 0).
GPUMEM_HD inline char32_t previous_code_point(char const* p, size_type& end) {
  size_type start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(p[start]) & 0xC0) == 0x80)
    --start;
  char32_t c;
  if (utf8::decode(p + start, end - start, c) != end - start) {  // not one sequence: one byte
    start = end - 1;
    utf8::decode(p + start, 1, c);
  }
  end = start;
  return c;
}

// CPython's final-sigma context for the capital sigma at bytes [at, after) of p[0, n):
// \p{cased} \p{case-ignorable}* SIGMA !(\p{case-ignorable}* \p{cased}).
GPUMEM_HD inline bool final_sigma(char const* p, size_type n, size_type at, size_type after) {
  bool cased_before = false;
  for (size_type j = at; j > 0;) {
    char32_t const c = previous_code_point(p, j);
    if (!unicode::is_case_ignorable(c)) {
      cased_before = unicode::is_cased(c);
      break;
    }
  }
  if (!cased_before) return false;
  for (size_type j = after; j < n;) {
    char32_t c;
    j += utf8::decode(p + j, n - j, c);
    if (!unicode::is_case_ignorable(c)) return !unicode::is_cased(c);
  }
  return true;
}

GPUMEM_HD inline char ascii_upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}
GPUMEM_HD inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

GPUMEM_HD inline void convert_ascii(char const* p, size_type n, case_operation op, case_writer& w) {
  bool previous_is_cased = false;
  for (size_type i = 0; i < n; ++i) {
    char const c = p[i];
    bool const cased = ascii_lower(c) != c || ascii_upper(c) != c;
    char out = c;
    switch (op) {
      case case_operation::upper:
        out = ascii_upper(c);
        break;
      case case_operation::lower:
      case case_operation::casefold:
        out = ascii_lower(c);
        break;
      case case_operation::capitalize:
        out = i == 0 ? ascii_upper(c) : ascii_lower(c);
        break;
      case case_operation::title:
        out = previous_is_cased ? ascii_lower(c) : ascii_upper(c);
        previous_is_cased = cased;
        break;
      case case_operation::swapcase:
        out = cased ? static_cast<char>(c ^ 0x20) : c;
        break;
    }
    w.put_ascii(out);
  }
}

// The mapping of one code point c at bytes [at, after) of p[0, n) under `op`; previous_is_cased
// is title's state (CPython's do_title), updated here. Every path that does not return early
// lowers c, with the final-sigma rule (CPython's lower_ucs4).
GPUMEM_HD inline unicode::case_mapping map_in_context(char const* p, size_type n, size_type at,
                                                      size_type after, char32_t c,
                                                      case_operation op, bool& previous_is_cased) {
  switch (op) {
    case case_operation::upper:
      return unicode::to_upper(c);
    case case_operation::casefold:
      return unicode::casefold(c);
    case case_operation::lower:
      break;
    case case_operation::capitalize:
      if (at == 0) return unicode::to_title(c);
      break;
    case case_operation::title: {
      bool const lowered = previous_is_cased;
      previous_is_cased = unicode::is_cased(c);
      if (!lowered) return unicode::to_title(c);
      break;
    }
    case case_operation::swapcase:
      if (unicode::is_upper(c)) break;
      if (unicode::is_lower(c)) return unicode::to_upper(c);
      return {{c, 0, 0}, 1};
  }
  if (c != 0x03A3) return unicode::to_lower(c);
  return {{final_sigma(p, n, at, after) ? char32_t{0x03C2} : char32_t{0x03C3}, 0, 0}, 1};
}

GPUMEM_STRINGS_NOINLINE GPUMEM_HD inline udf_string convert_case(string_view s, case_operation op) {
  udf_string out;
  char const* const p = s.data();
  size_type const n = s.size_bytes();
  if (n == 0 || !out.reserve(n)) return out;
  case_writer w(out);
  bool ascii = true;
  for (size_type i = 0; i < n && ascii; ++i)
    ascii = static_cast<unsigned char>(p[i]) < 0x80;
  if (ascii) {
    convert_ascii(p, n, op, w);
  } else {
    bool previous_is_cased = false;
    for (size_type i = 0; i < n && !out.failed();) {
      char32_t c;
      size_type const after = i + utf8::decode(p + i, n - i, c);
      w.put(map_in_context(p, n, i, after, c, op, previous_is_cased));
      i = after;
    }
  }
  w.flush();
  return out;
}

}  // namespace gpumem::strings::detail
