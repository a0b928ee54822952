#!/usr/bin/env python3
"""Prints what CPython's str methods say of every code point, for tests/strings/unicode_test.cu.

Usage: unicode_oracle.py [--version]   (--version: only the first line, which is quick)

Output: a first line `version <unicodedata.unidata_version>`, then runs of consecutive code points
whose lines would be identical, one per line:

    <first code point, hex> <count> <flags, hex> <decimal value or -1> <upper> <lower> <title> <fold>

A mapping of one code point is written as its offset from the code point (`+32`, `-32`, `0`), so
runs like A..Z share a line; a longer mapping as its code points in hex joined by `.`. Flag bits,
from bit 0: isalpha isdecimal isdigit isnumeric isalnum isspace, the lowercase, uppercase and
titlecase flags of islower/isupper/istitle, Cased, Case_Ignorable.

Everything is read from the running interpreter, each through the method the string functions
mirror; no table is shared with scripts/gen-unicode-tables.py.
"""
import sys
import unicodedata

SIGMA, FINAL_SIGMA = "\u03a3", "\u03c2"


def flags_of(ch):
    lower, upper = ch.islower(), ch.isupper()  # one character: CPython's per-character flags
    # str.istitle of one character is "titlecase or uppercase"; the titlecase flag alone is the
    # general category Lt in CPython's tables.
    title = unicodedata.category(ch) == "Lt"
    assert ch.istitle() == (title or upper), hex(ord(ch))
    # Case_Ignorable from the final-sigma rule: between "A" and a sigma, x is passed over when
    # ignorable (the sigma is then final: "A" is cased), else the sigma is final only if x is
    # cased; after a final-position sigma, x is passed over when ignorable (final), else the sigma
    # is final only if x is not cased. Both final: x is ignorable.
    final_after = ("A" + ch + SIGMA).lower()[-1] == FINAL_SIGMA
    final_before = ("A" + SIGMA + ch).lower()[1] == FINAL_SIGMA
    ignorable = final_after and final_before
    # Cased, where the rule shows it (x not ignorable: "x" + sigma is final iff x is cased);
    # an ignorable character's casing never shows there: Unicode defines Cased as Lowercase,
    # Uppercase or Lt.
    if ignorable:
        cased = lower or upper or title
    else:
        cased = (ch + SIGMA).lower()[-1] == FINAL_SIGMA
    bits = [ch.isalpha(), ch.isdecimal(), ch.isdigit(), ch.isnumeric(), ch.isalnum(),
            ch.isspace(), lower, upper, title, cased, ignorable]
    return sum(1 << i for i, b in enumerate(bits) if b)


def decimal_of(ch):
    if not ch.isdecimal():
        return -1
    value = int(ch)  # what int() accepts
    assert value == unicodedata.decimal(ch), hex(ord(ch))
    return value


def mapping(cp, text):
    if len(text) == 1:
        offset = ord(text) - cp
        return f"{offset:+d}" if offset else "0"
    return ".".join(f"{ord(c):x}" for c in text)


def main():
    out = sys.stdout
    out.write(f"version {unicodedata.unidata_version}\n")
    if sys.argv[1:] == ["--version"]:
        return
    run_start, run_line, run_count = 0, None, 0
    for cp in range(0x110000):
        ch = chr(cp)
        line = (f"{flags_of(ch):x} {decimal_of(ch)} {mapping(cp, ch.upper())} "
                f"{mapping(cp, ch.lower())} {mapping(cp, ch.title())} {mapping(cp, ch.casefold())}")
        if line == run_line:
            run_count += 1
            continue
        if run_line is not None:
            out.write(f"{run_start:x} {run_count} {run_line}\n")
        run_start, run_line, run_count = cp, line, 1
    out.write(f"{run_start:x} {run_count} {run_line}\n")


if __name__ == "__main__":
    main()
