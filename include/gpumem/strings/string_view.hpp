// gpumem/strings/string_view.hpp
//
// string_view: a non-owning view of UTF-8 bytes — a row of a strings column, a udf_string, a
// literal — with Python's character (code point) positions on top of byte storage.
//
//   strings::string_view s(column_view.element(row));   // or string_view("abc"), (p, bytes)
//   for (auto it = s.begin(); it != s.end(); ++it) {
//     char32_t c = *it;  size_type at = it.byte_position();
//   }
//   strings::string_view tail = s.substr(2, strings::npos);   // characters 2.. (Python s[2:])
//
// Costs: size_bytes(), data(), empty() and comparisons need no scan; length(), byte_offset(i),
// char_at(i) and substr() scan from the start (count_characters is eight bytes a step). Functions
// that walk a string should iterate once rather than call char_at in a loop.
//
// Positions: byte_offset(i) is the byte where character i starts, 0 for i <= 0 and size_bytes() for
// i >= length(). substr(pos, count) clamps pos to [0, length()]; count < 0 (npos) means "to the
// end". char_at(i) needs 0 <= i < length() (outside: 0). Comparisons are by unsigned bytes, which
// is code-point order for valid UTF-8 (Python's str order).
//
// Ownership: none; the bytes must outlive the view. Trivially copyable (kernel arguments). Thread
// safety: a value; any number of threads may read one view. Invalid UTF-8: see utf8.hpp.
#pragma once

#include <gpumem/column/strings_column_device_view.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/strings/types.hpp>
#include <gpumem/strings/utf8.hpp>

#include <cstddef>
#include <iterator>

namespace gpumem::strings {

class string_view {
 public:
  // A forward iterator over the code points; byte_position() is the byte offset of the current
  // character in the view, char_position() its index.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = char32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = char32_t;

    const_iterator() = default;
    GPUMEM_HD const_iterator(char const* data, size_type bytes, size_type byte_pos,
                             size_type char_pos)
        : data_(data), bytes_(bytes), byte_pos_(byte_pos), char_pos_(char_pos) {}

    GPUMEM_HD char32_t operator*() const {
      char32_t cp;
      utf8::decode(data_ + byte_pos_, bytes_ - byte_pos_, cp);
      return cp;
    }
    GPUMEM_HD const_iterator& operator++() {
      unsigned char const b = static_cast<unsigned char>(data_[byte_pos_]);
      if (b < 0x80) {
        ++byte_pos_;
      } else {
        char32_t cp;
        byte_pos_ += utf8::decode(data_ + byte_pos_, bytes_ - byte_pos_, cp);
      }
      ++char_pos_;
      return *this;
    }
    GPUMEM_HD const_iterator operator++(int) {
      const_iterator before = *this;
      ++*this;
      return before;
    }
    GPUMEM_HD size_type byte_position() const { return byte_pos_; }
    GPUMEM_HD size_type char_position() const { return char_pos_; }
    // Iterators of one view compare by byte position.
    GPUMEM_HD bool operator==(const_iterator const& o) const { return byte_pos_ == o.byte_pos_; }
    GPUMEM_HD bool operator!=(const_iterator const& o) const { return byte_pos_ != o.byte_pos_; }

   private:
    char const* data_ = nullptr;
    size_type bytes_ = 0;
    size_type byte_pos_ = 0;
    size_type char_pos_ = 0;
  };
  using iterator = const_iterator;

  string_view() = default;
  // A negative count is taken as 0 (an empty view), so no function ever sees a negative size.
  GPUMEM_HD string_view(char const* data, size_type bytes)
      : data_(data), bytes_(bytes < 0 ? 0 : bytes) {}
  // A NUL-terminated string (not including the NUL); null gives the empty view.
  GPUMEM_HD string_view(char const* cstr) : data_(cstr) {
    if (cstr != nullptr)
      while (cstr[bytes_] != '\0')
        ++bytes_;
  }
  GPUMEM_HD string_view(string_element e) : data_(e.data), bytes_(e.bytes < 0 ? 0 : e.bytes) {}

  GPUMEM_HD char const* data() const { return data_; }
  GPUMEM_HD size_type size_bytes() const { return bytes_; }
  GPUMEM_HD bool empty() const { return bytes_ == 0; }
  GPUMEM_HD size_type length() const { return utf8::count_characters(data_, bytes_); }

  GPUMEM_HD const_iterator begin() const { return {data_, bytes_, 0, 0}; }
  // The end iterator's char_position() is not computed (it would need a scan): it reads npos.
  GPUMEM_HD const_iterator end() const { return {data_, bytes_, bytes_, npos}; }

  GPUMEM_HD size_type byte_offset(size_type char_index) const { return advance(0, char_index); }
  GPUMEM_HD char32_t char_at(size_type i) const {
    size_type const at = byte_offset(i);
    if (i < 0 || at >= bytes_) return 0;
    char32_t cp;
    utf8::decode(data_ + at, bytes_ - at, cp);
    return cp;
  }
  GPUMEM_HD string_view substr(size_type char_pos, size_type char_count = npos) const {
    size_type const first = byte_offset(char_pos);
    size_type const last = char_count < 0 ? bytes_ : advance(first, char_count);
    return {data_ + first, last - first};
  }
  // The byte `count` characters after the character starting at byte `from` (clamped to
  // size_bytes(); `from` itself for count <= 0). One scan, for callers that walk forward.
  GPUMEM_HD size_type advance(size_type from, size_type count) const {
    if (count <= 0) return from;
    size_type pos = from;
    // ASCII runs move eight bytes a step while at least eight characters remain to skip.
    while (count >= 8 && pos + 8 <= bytes_ &&
           (utf8::detail::load64(data_ + pos) & utf8::detail::high_bits) == 0) {
      pos += 8;
      count -= 8;
    }
    for (; pos < bytes_; ++pos) {
      if (!utf8::is_continuation(static_cast<unsigned char>(data_[pos]))) {
        if (count == 0) return pos;
        --count;
      }
    }
    return bytes_;
  }

  // <0, 0, >0 as the bytes compare (unsigned), a prefix first.
  GPUMEM_HD int compare(string_view other) const {
    size_type const n = bytes_ < other.bytes_ ? bytes_ : other.bytes_;
    for (size_type i = 0; i < n; ++i) {
      unsigned char const a = static_cast<unsigned char>(data_[i]);
      unsigned char const b = static_cast<unsigned char>(other.data_[i]);
      if (a != b) return a < b ? -1 : 1;
    }
    return bytes_ == other.bytes_ ? 0 : (bytes_ < other.bytes_ ? -1 : 1);
  }

  GPUMEM_HD friend bool operator==(string_view a, string_view b) {
    if (a.bytes_ != b.bytes_) return false;
    if (a.data_ == b.data_) return true;
    size_type i = 0;
    for (; i + 8 <= a.bytes_; i += 8)
      if (utf8::detail::load64(a.data_ + i) != utf8::detail::load64(b.data_ + i)) return false;
    for (; i < a.bytes_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }
  GPUMEM_HD friend bool operator!=(string_view a, string_view b) { return !(a == b); }
  GPUMEM_HD friend bool operator<(string_view a, string_view b) { return a.compare(b) < 0; }
  GPUMEM_HD friend bool operator<=(string_view a, string_view b) { return a.compare(b) <= 0; }
  GPUMEM_HD friend bool operator>(string_view a, string_view b) { return a.compare(b) > 0; }
  GPUMEM_HD friend bool operator>=(string_view a, string_view b) { return a.compare(b) >= 0; }

 private:
  char const* data_ = nullptr;
  size_type bytes_ = 0;
};

}  // namespace gpumem::strings
