// gpumem/strings/utf8.hpp
//
// UTF-8 encoding and decoding for device strings (namespace gpumem::strings::utf8), GPUMEM_HD and
// allocation-free:
//
//   sequence_bytes(lead)          1..4 by the lead byte; 0 for a byte that cannot start a character
//                                 (a continuation byte 80..BF, or C0, C1, F5..FF, never valid)
//   decode(p, avail, cp)          one character at p: the bytes consumed (>= 1 when avail > 0);
//                                 an invalid sequence consumes 1 byte and yields U+FFFD
//   encoded_bytes(cp), encode(cp, out)
//                                 1..4 bytes; a surrogate or a value past U+10FFFF is written as
//                                 U+FFFD (3 bytes), so an encoded string is always valid UTF-8
//   count_characters(p, bytes)    the bytes that are not continuation bytes (eight at a time)
//   is_valid(p, bytes)            what Python's strict decoder accepts: no overlong forms, no
//                                 surrogates (ED A0..BF), nothing past U+10FFFF, no truncation
//
//   char32_t cp;
//   for (size_type i = 0; i < n; i += utf8::decode(p + i, n - i, cp)) { ... }
//
// On valid UTF-8, count_characters and the number of decode steps agree. On invalid input every
// function stays inside [p, p + bytes) and returns a defined value, but a stray continuation byte
// is one decode step (U+FFFD) and no character for count_characters: check validity at the
// boundary (make_strings_column can) rather than in every function.
// Thread safety: pure functions.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/types.hpp>

#include <cstdint>
#include <cstring>

namespace gpumem::strings::utf8 {

inline constexpr char32_t replacement_character = 0xFFFD;

GPUMEM_HD inline bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

GPUMEM_HD inline int sequence_bytes(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

namespace detail {

// One character by Python's strict rules: its byte count (1..4), or 0 when the bytes at p (at
// most `avail`, at least 1) do not start a valid sequence.
GPUMEM_HD inline int decode_strict(char const* p, size_type avail, char32_t& cp) {
  unsigned const b0 = static_cast<unsigned char>(p[0]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  int const n = sequence_bytes(static_cast<unsigned char>(b0));
  if (n == 0 || avail < n) return 0;
  // The second byte's range excludes overlong forms (E0, F0), surrogates (ED) and values past
  // U+10FFFF (F4).
  unsigned lo = 0x80;
  unsigned hi = 0xBF;
  if (b0 == 0xE0) lo = 0xA0;
  if (b0 == 0xED) hi = 0x9F;
  if (b0 == 0xF0) lo = 0x90;
  if (b0 == 0xF4) hi = 0x8F;
  unsigned const b1 = static_cast<unsigned char>(p[1]);
  if (b1 < lo || b1 > hi) return 0;
  char32_t c = (b0 & (0x7Fu >> n)) << 6 | (b1 & 0x3F);
  for (int i = 2; i < n; ++i) {
    unsigned const b = static_cast<unsigned char>(p[i]);
    if (!is_continuation(static_cast<unsigned char>(b))) return 0;
    c = c << 6 | (b & 0x3F);
  }
  cp = c;
  return n;
}

GPUMEM_HD inline int popcount64(std::uint64_t x) {
#if GPUMEM_DEVICE_PASS
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}

// Eight bytes at `p` (any alignment). Callers read only within their string; the empty asm hides
// the pointer's origin from GCC's -Warray-bounds, which otherwise reports the (dead) 8-byte path of
// a loop inlined over a shorter literal as an out-of-bounds read (GCC 13 at -O2).
GPUMEM_HD inline std::uint64_t load64(char const* p) {
#if !GPUMEM_DEVICE_PASS && defined(__GNUC__)
  __asm__("" : "+r"(p));
#endif
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

inline constexpr std::uint64_t high_bits = 0x8080808080808080ull;

}  // namespace detail

GPUMEM_HD inline int decode(char const* p, size_type avail, char32_t& cp) {
  if (avail <= 0) {
    cp = 0;
    return 0;
  }
  int const n = detail::decode_strict(p, avail, cp);
  if (n != 0) return n;
  cp = replacement_character;
  return 1;
}

GPUMEM_HD inline int encoded_bytes(char32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  if (cp <= 0x10FFFF) return 4;
  return 3;  // U+FFFD
}

GPUMEM_HD inline int encode(char32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = replacement_character;
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

GPUMEM_HD inline size_type count_characters(char const* p, size_type bytes) {
  size_type continuation = 0;
  size_type i = 0;
  // A continuation byte is 10xxxxxx: bit 7 set and bit 6 (shifted into bit 7) clear.
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t const w = detail::load64(p + i);
    continuation += detail::popcount64(w & ~(w << 1) & detail::high_bits);
  }
  for (; i < bytes; ++i)
    if (is_continuation(static_cast<unsigned char>(p[i]))) ++continuation;
  return bytes < 0 ? 0 : bytes - continuation;
}

GPUMEM_HD inline bool is_valid(char const* p, size_type bytes) {
  size_type i = 0;
  while (i < bytes) {
    if (i + 8 <= bytes && (detail::load64(p + i) & detail::high_bits) == 0) {
      i += 8;  // eight ASCII bytes
      continue;
    }
    char32_t cp;
    int const n = detail::decode_strict(p + i, bytes - i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace gpumem::strings::utf8
