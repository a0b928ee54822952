// The UTF-8 check of strings columns (see utf8_validation.hpp). Each lead byte fixes the length
// of its sequence and the range its second byte may take (which rules out overlong forms,
// surrogates and code points above U+10FFFF); every later byte is a continuation, 0x80..0xbf.
#include "utf8_validation.hpp"

#include <cstdio>

namespace gpumem::detail {

namespace {

std::string hex(unsigned char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(byte));
  return text;
}

struct sequence_rule {
  int length = 0;  // 0: the byte cannot start a sequence
  unsigned char second_low = 0x80;
  unsigned char second_high = 0xbf;
};

sequence_rule rule_for(unsigned char lead) {
  if (lead < 0x80) return {1};
  if (lead < 0xc2) return {};  // continuation bytes, and 0xc0/0xc1 (overlong 2-byte forms)
  if (lead < 0xe0) return {2};
  if (lead == 0xe0) return {3, 0xa0, 0xbf};  // below 0xa0: overlong
  if (lead == 0xed) return {3, 0x80, 0x9f};  // above 0x9f: surrogates U+D800..U+DFFF
  if (lead < 0xf0) return {3};
  if (lead == 0xf0) return {4, 0x90, 0xbf};  // below 0x90: overlong
  if (lead < 0xf4) return {4};
  if (lead == 0xf4) return {4, 0x80, 0x8f};  // above 0x8f: past U+10FFFF
  return {};                                 // 0xf5..0xff never appear
}

}  // namespace

std::optional<utf8_problem> find_invalid_utf8(unsigned char const* bytes, std::size_t size) {
  std::size_t i = 0;
  while (i < size) {
    unsigned char const lead = bytes[i];
    sequence_rule const rule = rule_for(lead);
    if (rule.length == 0) return utf8_problem{i, hex(lead) + " cannot start a character"};
    auto const length = static_cast<std::size_t>(rule.length);
    for (std::size_t k = 1; k < length; ++k) {
      if (i + k >= size) {
        return utf8_problem{i, hex(lead) + " starts a " + std::to_string(length) +
                                   "-byte sequence cut short by the end"};
      }
      unsigned char const b = bytes[i + k];
      unsigned char const low = k == 1 ? rule.second_low : 0x80;
      unsigned char const high = k == 1 ? rule.second_high : 0xbf;
      if (b < low || b > high) {
        return utf8_problem{i, hex(lead) + " is followed by " + hex(b) + " at its byte " +
                                   std::to_string(k + 1) + " (" + hex(low) + ".." + hex(high) +
                                   " expected)"};
      }
    }
    i += length;
  }
  return std::nullopt;
}

}  // namespace gpumem::detail
