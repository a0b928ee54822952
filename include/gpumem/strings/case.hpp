// gpumem/strings/case.hpp
//
// The case conversions of Python's `str`, with CPython 3.11's full mappings: upper(s) is
// s.upper(), lower(s) s.lower(), casefold(s) s.casefold(), capitalize(s) s.capitalize(), title(s)
// s.title(), swapcase(s) s.swapcase().
//
//   strings::udf_string u = strings::upper(v);          // "straße" -> "STRASSE"
//   if (u.failed()) ...                                 // out_of_memory: the NRT heap was full
//
// What CPython does, and so these functions:
//   * a character may map to 1..3 characters (U+00DF -> "SS", U+FB03 -> "FFI", U+0130 -> "i̇");
//   * capital sigma U+03A3 lowers to final sigma U+03C2 when, passing over case-ignorable
//     characters, a cased character precedes it and none follows (CPython's
//     handle_capital_sigma); lower, swapcase, and the lowered parts of capitalize and title
//     apply it;
//   * capitalize: the first character titlecased (since 3.8), the rest lowered;
//   * title: a character is titlecased when the one before it is not cased, else lowered;
//   * swapcase: Uppercase characters lowered, Lowercase ones uppercased, others kept (titlecase
//     digraphs such as U+01C5 are neither, and stay).
//
// Ownership: the result is a new udf_string (NRT heap, freed by its destructor). It is allocated
// once with the input's byte size, which is exact for ASCII and nearly always enough; a string
// that grows (U+00DF -> "SS") grows by doubling. Never an allocation per character. The empty
// string allocates nothing.
// Errors: out of NRT heap memory -> the result is failed (error() == errc::out_of_memory).
// Bytes that are not valid UTF-8 read as U+FFFD (utf8::decode) and are written as U+FFFD.
// Thread safety: GPUMEM_HD; each call reads only its argument and owns its result.
#pragma once

#include <gpumem/core/config.hpp>
#include <gpumem/strings/detail/case_convert.hpp>
#include <gpumem/strings/string_view.hpp>
#include <gpumem/strings/udf_string.hpp>

namespace gpumem::strings {

GPUMEM_HD inline udf_string upper(string_view s) {
  return detail::convert_case(s, detail::case_operation::upper);
}
GPUMEM_HD inline udf_string lower(string_view s) {
  return detail::convert_case(s, detail::case_operation::lower);
}
GPUMEM_HD inline udf_string casefold(string_view s) {
  return detail::convert_case(s, detail::case_operation::casefold);
}
GPUMEM_HD inline udf_string capitalize(string_view s) {
  return detail::convert_case(s, detail::case_operation::capitalize);
}
GPUMEM_HD inline udf_string title(string_view s) {
  return detail::convert_case(s, detail::case_operation::title);
}
GPUMEM_HD inline udf_string swapcase(string_view s) {
  return detail::convert_case(s, detail::case_operation::swapcase);
}

}  // namespace gpumem::strings
