#!/usr/bin/env python3
"""What CPython says of the cases test_strings_case checks (strings/case.hpp, predicates.hpp,
convert.hpp): a seeded, deterministic set of inputs and CPython's answers, one case a line.

    case_oracle.py --version        "version <unicodedata.unidata_version>"
    case_oracle.py --seed N [--count S]
                                    "version ..." then the cases: S strings (default 700) through
                                    every case operation and predicate, and number conversions in
                                    proportion (S * 25/7 to_int, S * 5 to_float, S * 5/7 from_int,
                                    S * 25/7 from_float); the default gives about 20,000 cases

A case line is `op arg input expected`:
  upper lower casefold capitalize title swapcase   input: UTF-8 hex ('-' for empty); expected: hex
  is_alnum ... is_ascii                            expected: 0 or 1
  to_int (arg: the base)                           expected: ok:<decimal> | value_error |
                                                   overflow_error (outside int64: gpumem's one
                                                   difference from Python's big int)
  to_float                                         expected: ok:<16 hex digits of the double> |
                                                   value_error
  from_int (input: the decimal int64)              expected: hex of str(v)
  from_float (input: 16 hex digits of the double)  expected: hex of repr(v)
"""
import random
import struct
import sys
import unicodedata
from decimal import Decimal

CASE_OPS = {
    "upper": str.upper, "lower": str.lower, "casefold": str.casefold,
    "capitalize": str.capitalize, "title": str.title, "swapcase": str.swapcase,
}
PREDICATES = {
    "is_alnum": str.isalnum, "is_alpha": str.isalpha, "is_decimal": str.isdecimal,
    "is_digit": str.isdigit, "is_numeric": str.isnumeric, "is_space": str.isspace,
    "is_lower": str.islower, "is_upper": str.isupper, "is_title": str.istitle,
    "is_ascii": str.isascii,
}

SPECIAL = "ßŉǰΐΰﬃﬀﬅİıΣσςǅǆǄǈǋᾈᾼῼÀéÑøĳŸẞK"
GREEK = "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρστυφχψω"
IGNORABLE = ["'", "\u2019", ".", ":", "^", "`", "\u0345", "\u0300", "\u0301", "\u0308", "\u00ad",
             "\u02bc", "\u200d"]
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "０１２３４５６７８９",
          "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "๐๑๒๓๔๕๖๗๘๙", "᠐᠑᠒᠓᠔᠕᠖᠗᠘᠙"]
NUMERIC_ONLY = "²³¹½¼⅓ⅫⅣ一二三十百万①⑩"
SPACES = ["\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ", "\x85", "\xa0",
          "\u1680", "\u2000", "\u2005", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NOT_SPACES = ["\u200b", "\ufeff", "\u180e", "\x00", "\x08"]
WORDS = ["hello", "World", "PYTHON", "a", "I", "x1", "don't", "o'neil", "straße", "ΟΔΟΣ", "ΣΑΣ",
         "Σ", "ὈΔΥΣΣΕΎΣ", "ǆungla", "ǅem", "ﬁre", "İstanbul", "ııI", "ŉ", "ǰ", "ΐ", "Ǉ", "ǉ",
         "АБВгде", "ՔԱՂԱՔ", "ꞵ", "𐐀𐐨", "ᏸᏰ", "ǈ", "Ⓐⓑ", "ᾳᾼ"]


def random_char(rng):
    k = rng.random()
    if k < 0.30:
        return chr(rng.randrange(0x20, 0x7F))
    if k < 0.45:
        return rng.choice(SPECIAL + GREEK)
    if k < 0.55:
        return rng.choice(IGNORABLE)
    if k < 0.62:
        return rng.choice(rng.choice(DIGITS))
    if k < 0.67:
        return rng.choice(SPACES)
    if k < 0.70:
        return rng.choice(NUMERIC_ONLY)
    lo, hi = rng.choice([(0x80, 0x800), (0x800, 0x10000), (0x10000, 0x30000), (0x370, 0x530),
                         (0x1E00, 0x2000), (0x2C00, 0x2D30), (0xA640, 0xA7FF), (0x10400, 0x10500),
                         (0x1E900, 0x1E960)])
    c = rng.randrange(lo, hi)
    return "?" if 0xD800 <= c < 0xE000 else chr(c)


def random_text(rng):
    """A string of words, special characters and separators."""
    parts = []
    for _ in range(rng.randrange(0, 8)):
        k = rng.random()
        if k < 0.35:
            w = rng.choice(WORDS)
            parts.append(rng.choice([w, w.upper(), w.lower(), w.title()]))
        elif k < 0.5:
            # sigma among case-ignorable characters, word-final or not
            parts.append(rng.choice(["", "a", "Α", "ω", "1", " "]) +
                         "".join(rng.choice(IGNORABLE) for _ in range(rng.randrange(3))) + "Σ" +
                         "".join(rng.choice(IGNORABLE) for _ in range(rng.randrange(3))) +
                         rng.choice(["", "a", "Β", " ", ".", "Σ", "1"]))
        elif k < 0.85:
            parts.append("".join(random_char(rng) for _ in range(rng.randrange(1, 6))))
        else:
            parts.append(rng.choice(SPACES + [" ", "-", "_"]))
    return "".join(parts)


def class_text(rng):
    """A string made (mostly) of one class, so that the predicates are often true."""
    n = rng.randrange(1, 8)
    pick = rng.randrange(8)
    if pick == 0:
        digits = rng.choice(DIGITS)
        s = "".join(rng.choice(digits) for _ in range(n))
    elif pick == 1:
        s = "".join(rng.choice(SPACES) for _ in range(n))
    elif pick == 2:
        s = "".join(rng.choice(NUMERIC_ONLY + "0123456789") for _ in range(n))
    elif pick == 3:
        s = " ".join(rng.choice(WORDS).title() for _ in range(n))
    elif pick == 4:
        s = " ".join(rng.choice(WORDS).lower() for _ in range(n))
    elif pick == 5:
        s = " ".join(rng.choice(WORDS).upper() for _ in range(n))
    elif pick == 6:
        s = "".join(rng.choice(SPECIAL + GREEK + "abcXYZ") for _ in range(n))
    else:
        s = "".join(chr(rng.randrange(0, 0x80)) for _ in range(n))
    if rng.random() < 0.25:  # an intruder
        i = rng.randrange(len(s) + 1)
        s = s[:i] + random_char(rng) + s[i:]
    return s


def hexs(s):
    b = s.encode("utf-8")
    return b.hex() if b else "-"


def random_digits(rng, base, n):
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    return "".join(rng.choice(alphabet) for _ in range(n))


def with_underscores(rng, digits):
    if rng.random() < 0.7 or len(digits) < 2:
        return digits
    out = digits[0]
    for c in digits[1:]:
        r = rng.random()
        out += ("_" if r < 0.2 else "__" if r < 0.22 else "") + c
    return out


def random_int_text(rng):
    base = rng.choice([10, 10, 10, 0, 0, 2, 8, 16, 36, rng.randrange(2, 37), 1, 37, -1])
    b = base if 2 <= base <= 36 else rng.choice([2, 8, 10, 16])
    n = rng.choice([1, 2, 3, 5, 10, 18, 19, 20, 25, rng.randrange(1, 70)])
    digits = random_digits(rng, b, n)
    r = rng.random()
    if r < 0.1:
        digits = str(rng.choice([2**63 - 1, 2**63, 2**63 + 1, 2**64, 2**64 - 1]) + rng.randrange(-3, 4))
    elif r < 0.15:
        digits = "0" * rng.randrange(1, 4) + digits
    elif r < 0.2 and b == 10:
        script = rng.choice(DIGITS)
        digits = "".join(script[int(c)] for c in digits)
    elif r < 0.22:
        digits = "0" * rng.choice([4300, 4301])
    digits = with_underscores(rng, digits)
    if rng.random() < 0.25:
        prefix = rng.choice(["0x", "0X", "0o", "0O", "0b", "0B", "0x_", "0b_", "0_", "0"])
        digits = prefix + digits
    if rng.random() < 0.3:
        digits = rng.choice(["+", "-", "+ ", "--"]) + digits
    if rng.random() < 0.3:
        digits = rng.choice(SPACES) + digits + rng.choice(SPACES + [""])
    if rng.random() < 0.08:
        i = rng.randrange(len(digits) + 1)
        digits = digits[:i] + rng.choice(["_", " ", "x", "\x00", "é", ".", "٣", "\u0660"]) + digits[i:]
    return base, digits


def int_expected(text, base):
    try:
        v = int(text, base)
    except ValueError:
        return "value_error"
    if not -2**63 <= v < 2**63:
        return "overflow_error"
    return "ok:%d" % v


def double_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def bits_double(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def random_double(rng):
    k = rng.random()
    if k < 0.35:
        return bits_double(rng.getrandbits(64))
    if k < 0.45:
        return bits_double(rng.getrandbits(52))  # subnormal
    if k < 0.55:
        return 10.0 ** rng.randrange(-323, 309)
    if k < 0.65:
        return float(2**53 + rng.randrange(-50, 50)) * rng.choice([1, -1])
    if k < 0.75:
        return float(rng.randrange(0, 10**rng.randrange(1, 18)))
    if k < 0.85:
        return rng.choice([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 5e-324, 1e16,
                           1e-5, 0.0001, 123.0, 1e15, 9999999999999998.0, 1.7976931348623157e308,
                           2.2250738585072014e-308, 0.1, 0.3, 1 / 3])
    return rng.random() * 10.0 ** rng.randrange(-30, 30)


def halfway_text(rng):
    """The exact decimal halfway between two adjacent doubles, or just either side of it."""
    b = rng.getrandbits(63)
    if (b >> 52) >= 0x7FE:
        b = rng.getrandbits(60)
    lo, hi = bits_double(b), bits_double(b + 1)
    h = (Decimal(lo) + Decimal(hi)) / 2
    s = format(h, "e")
    mant, exp = s.split("e")
    if rng.random() < 0.3:  # nudge the last digit
        mant = mant[:-1] + str((int(mant[-1]) + rng.choice([1, 9])) % 10)
    return mant + "e" + exp


def random_float_text(rng):
    k = rng.random()
    if k < 0.2:
        x = random_double(rng)
        s = rng.choice([repr(x), "%.17g" % x, "%.25e" % x, "%.3f" % x if abs(x) < 1e30 else repr(x)])
    elif k < 0.35:
        s = halfway_text(rng)
    elif k < 0.6:
        n = rng.choice([1, 3, 8, 15, 16, 17, 20, 40, rng.randrange(1, 30)])
        d = random_digits(rng, 10, n)
        if rng.random() < 0.6:
            i = rng.randrange(len(d) + 1)
            d = d[:i] + "." + d[i:]
        if rng.random() < 0.6:
            d += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.choice(
                [rng.randrange(0, 30), rng.randrange(280, 330), rng.randrange(0, 400), 99999999999]))
        s = with_underscores(rng, d)
    elif k < 0.65:
        n = rng.choice([700, 780, 800, 801, 900])
        s = "0." + "0" * rng.randrange(0, 330) + random_digits(rng, 10, n)
        if rng.random() < 0.5:
            s = random_digits(rng, 10, n) + "e-" + str(rng.randrange(300, 1200))
    elif k < 0.75:
        s = rng.choice(["inf", "Inf", "INFINITY", "iNfInItY", "nan", "NaN", "NAN", "infinit",
                        "infx", "nanx", "in", "na", "-inf", "+nan", "-nan", "+Infinity"])
    elif k < 0.8:
        script = rng.choice(DIGITS)
        s = "".join(script[int(c)] for c in random_digits(rng, 10, rng.randrange(1, 8)))
        s += rng.choice(["", ".", "." + script[3], "e" + script[2]])
    else:
        s = rng.choice(["1e", ".", "1..2", "e5", "--1", "1_", "_1", "1__2", "0x1p3", "1e+",
                        "1_000.5", "1_0e1_0", "1._5", "1_.5", ".5", "5.", "+.5e-3", "0e0", "-0",
                        "1e-400", "1e400", "-1e400", "2.4703282292062327e-324",
                        "2.4703282292062328e-324", "1.7976931348623158e308",
                        "1.7976931348623159e308", "", " ", "1 2", "1\x00", "0.0000"])
    if rng.random() < 0.2:
        s = rng.choice(["+", "-"]) + s
    if rng.random() < 0.2:
        s = rng.choice(SPACES) + s + rng.choice(SPACES + [""])
    return s


def float_expected(text):
    try:
        x = float(text)
    except ValueError:
        return "value_error"
    return "ok:%016x" % double_bits(x)


def cases(seed, strings=700):
    rng = random.Random(seed)
    for _ in range(strings):
        s = random_text(rng) if rng.random() < 0.6 else class_text(rng)
        for name, f in CASE_OPS.items():
            yield name, 0, hexs(s), hexs(f(s))
        for name, f in PREDICATES.items():
            yield name, 0, hexs(s), "1" if f(s) else "0"
    for _ in range(strings * 25 // 7):
        base, text = random_int_text(rng)
        yield "to_int", base, hexs(text), int_expected(text, base)
    for _ in range(strings * 5):
        text = random_float_text(rng)
        yield "to_float", 0, hexs(text), float_expected(text)
    for _ in range(strings * 5 // 7):
        v = rng.choice([0, -1, 1, 2**63 - 1, -2**63, rng.randrange(-2**63, 2**63),
                        rng.randrange(-1000, 1000), 10**rng.randrange(0, 19)])
        yield "from_int", 0, str(v), hexs(str(v))
    for _ in range(strings * 25 // 7):
        x = random_double(rng)
        yield "from_float", 0, "%016x" % double_bits(x), hexs(repr(x))


def main():
    print("version", unicodedata.unidata_version)
    if sys.argv[1:2] == ["--version"]:
        return
    args = sys.argv[1:]
    seed = int(args[1]) if args[0:1] == ["--seed"] else 1
    strings = int(args[3]) if args[2:3] == ["--count"] else 700
    out = sys.stdout
    for op, arg, text, expected in cases(seed, strings):
        out.write("%s %d %s %s\n" % (op, arg, text, expected))


if __name__ == "__main__":
    main()
