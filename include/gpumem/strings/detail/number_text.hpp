// gpumem/strings/detail/number_text.hpp — not API: the text int() and float() parse.
//
// CPython parses a str as a number after rewriting it to ASCII, one character for one
// (_PyUnicode_TransformDecimalAndSpaceToASCII): a character below U+007F stays, a non-ASCII
// whitespace character (str.isspace) becomes ' ', a non-ASCII decimal digit becomes its ASCII
// digit, and anything else makes the text invalid. number_text presents a string_view that way,
// one ASCII character at a time, without copying: invalid characters (and NUL, which ends
// CPython's C string early and so always fails its parse) read as '?', which no parse accepts;
// the end reads as '\0'. Python's ASCII whitespace (Py_ISSPACE) is then " \t\n\v\f\r".
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/unicode.hpp>
#include <gpumem/strings/utf8.hpp>

namespace gpumem::strings::detail {

GPUMEM_HD inline bool is_py_ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

// 0..35 for 0-9, a-z, A-Z; 99 for anything else.
GPUMEM_HD inline int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

class number_text {
 public:
  GPUMEM_HD explicit number_text(string_view s) : p_(s.data()), n_(s.size_bytes()) { load(); }

  // The character at the cursor; '\0' at the end.
  GPUMEM_HD char peek() const { return current_; }
  // The character after it ('\0' past the end).
  GPUMEM_HD char peek_next() const {
    if (pos_ + width_ >= n_) return '\0';
    char32_t c;
    utf8::decode(p_ + pos_ + width_, n_ - pos_ - width_, c);
    return ascii_of(c);
  }
  GPUMEM_HD void advance() {
    pos_ += width_;
    load();
  }
  GPUMEM_HD bool at_end() const { return pos_ >= n_; }

 private:
  GPUMEM_HD static char ascii_of(char32_t c) {
    if (c < 0x7F) return c == 0 ? '?' : static_cast<char>(c);
    if (unicode::is_space(c)) return ' ';
    int const d = unicode::decimal_value(c);
    return d >= 0 ? static_cast<char>('0' + d) : '?';
  }
  GPUMEM_HD void load() {
    if (pos_ >= n_) {
      current_ = '\0';
      width_ = 0;
      return;
    }
    auto const b = static_cast<unsigned char>(p_[pos_]);
    if (b < 0x80) {
      current_ = b == 0 || b == 0x7F ? '?' : static_cast<char>(b);
      width_ = 1;
      return;
    }
    char32_t c;
    width_ = utf8::decode(p_ + pos_, n_ - pos_, c);
    current_ = ascii_of(c);
  }

  char const* p_;
  size_type n_;
  size_type pos_ = 0;
  size_type width_ = 0;
  char current_ = '\0';
};

}  // namespace gpumem::strings::detail
