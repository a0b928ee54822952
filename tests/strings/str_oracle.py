#!/usr/bin/env python3
"""The CPython side of test_strings_functions: generated str operations and what CPython answers.

    str_oracle.py --version        prints "version <unicodedata.unidata_version>"
    str_oracle.py SEED COUNT       prints "version ..." then COUNT cases, one a line

A case line is whitespace-separated tokens:

    OP  NSTR STR...  NINT INT...  =  ERROR VALUE NPARTS PART...

STR and PART are "x" followed by the UTF-8 bytes in hex ("x" alone is the empty string), or "N"
for None (an omitted argument); INT is a decimal int64 or "N". ERROR is "ok" or the errc name of
what CPython raised (value_error, index_error); VALUE is the integer result (a bool is 0/1; 0 when
the result is a string); the parts are the string results (one for a string, three for partition,
the list for split). The same SEED gives the same cases (random.Random(SEED), no other state).
"""
import random
import sys
import unicodedata

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.;:-+_/|=*#"
TWO_BYTE = "éßΣσςΐñΩİıÅøЖж\u0345\u0301\u0300"  # ΐ U+0390, İ U+0130, ı U+0131, combining marks
THREE_BYTE = "ﬃﬁ中文€\u1e9e\u2126\u212a\u00df\u20ac\u0905\u0e01\u1f80"
FOUR_BYTE = "\U0001F600\U00010400\U00010428\U0001D7CE\U0001F914"
WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
ALPHABETS = [
    ASCII,
    "ab",  # few letters: overlapping and repeated matches
    "a",
    ASCII + TWO_BYTE,
    TWO_BYTE + THREE_BYTE,
    ASCII + WHITESPACE,
    "ab" + WHITESPACE[:6] + "é",
    ASCII + TWO_BYTE + THREE_BYTE + FOUR_BYTE + WHITESPACE,
    "a\tb\nc\rd é\t中\t",  # expandtabs material
    "+-0123456789",
]


def make_string(rng):
    roll = rng.random()
    if roll < 0.06:
        return ""
    alphabet = rng.choice(ALPHABETS)
    n = rng.choice([1, 2, 3, 5, 8, 13, 20, 40]) if roll < 0.9 else rng.randint(60, 200)
    return "".join(rng.choice(alphabet) for _ in range(n))


def make_needle(rng, s):
    roll = rng.random()
    if roll < 0.1:
        return ""
    if roll < 0.65 and s:
        i = rng.randrange(len(s))
        return s[i:i + rng.choice([1, 1, 2, 3, 5])]
    return make_string(rng)[: rng.choice([1, 2, 3])]


def make_index(rng, s, allow_none=True):
    roll = rng.random()
    if allow_none and roll < 0.15:
        return None
    if roll < 0.25:
        return rng.choice([INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, 2**62, -(2**62),
                           2**31, -(2**31) - 1])
    return rng.randint(-len(s) - 3, len(s) + 3)


def run(fn):
    """(error, value, parts) of calling fn, in the line's terms."""
    try:
        out = fn()
    except ValueError:
        return "value_error", 0, []
    except IndexError:
        return "index_error", 0, []
    if isinstance(out, bool):
        return "ok", int(out), []
    if isinstance(out, int):
        return "ok", out, []
    if isinstance(out, str):
        return "ok", 0, [out]
    return "ok", 0, list(out)  # split's list, partition's tuple


def py_slice(s, start, stop, step):
    return s[start:stop:step]


def case(rng):
    """One random case: (op, strings, ints, callable)."""
    s = make_string(rng)
    op = rng.choice(OPS)
    if op in ("find", "rfind", "count", "index", "rindex", "startswith", "endswith"):
        sub = make_needle(rng, s)
        start, end = make_index(rng, s), make_index(rng, s)
        if rng.random() < 0.3:  # the whole string: the paths that count no characters
            start, end = rng.choice([None, 0]), None
        return op, [s, sub], [start, end], lambda: getattr(s, op)(sub, start, end)
    if op in ("startswith_tuple", "endswith_tuple"):
        subs = (make_needle(rng, s), make_needle(rng, s))
        start, end = make_index(rng, s), make_index(rng, s)
        name = op.split("_")[0]
        return op, [s, subs[0], subs[1]], [start, end], lambda: getattr(s, name)(subs, start, end)
    if op == "contains":
        sub = make_needle(rng, s)
        return op, [s, sub], [], lambda: sub in s
    if op in ("strip", "lstrip", "rstrip"):
        chars = None if rng.random() < 0.5 else make_needle(rng, s) + rng.choice(["", " ", "a"])
        return op, [s, chars], [], lambda: getattr(s, op)(chars)
    if op in ("split", "rsplit"):
        roll = rng.random()
        sep = None if roll < 0.4 else ("" if roll < 0.45 else make_needle(rng, s) or ",")
        maxsplit = rng.choice([-1, -1, -5, 0, 1, 2, 3, INT64_MAX])
        return op, [s, sep], [maxsplit], lambda: getattr(s, op)(sep, maxsplit)
    if op in ("partition", "rpartition"):
        sep = make_needle(rng, s)
        return op, [s, sep], [], lambda: getattr(s, op)(sep)
    if op == "len":
        return op, [s], [], lambda: len(s)
    if op == "compare":  # code-point order, as str's < and >
        roll = rng.random()
        t = s if roll < 0.2 else (make_needle(rng, s) if roll < 0.6 else make_string(rng))
        return op, [s, t], [], lambda: (s > t) - (s < t)
    if op == "concat":
        t = make_string(rng)
        return op, [s, t], [], lambda: s + t
    if op == "repeat":
        n = rng.choice([-(2**62), -3, -1, 0, 1, 2, 3, 7, 10])
        return op, [s], [n], lambda: s * n
    if op == "join":
        sep = rng.choice(["", ",", ", ", "é", make_needle(rng, s)])
        parts = [make_string(rng) for _ in range(rng.randint(0, 3))]
        return op, [sep] + parts, [], lambda: sep.join(parts)
    if op == "replace":
        old = make_needle(rng, s)
        new = rng.choice(["", "-", "XY", "é中", make_string(rng)[:3]])
        count = rng.choice([-1, -1, -7, 0, 1, 2, 3, INT64_MAX])
        return op, [s, old, new], [count], lambda: s.replace(old, new, count)
    if op == "at":
        i = make_index(rng, s, allow_none=False)
        return op, [s], [i], lambda: s[i]
    if op == "slice":
        start, stop = make_index(rng, s), make_index(rng, s)
        step = rng.choice([None, None, 1, 1, 2, 3, -1, -1, -2, -3, 0, INT64_MAX, INT64_MIN,
                           INT64_MIN + 1, len(s) + 1, -len(s) - 1])
        return op, [s], [start, stop, step], lambda: py_slice(s, start, stop, step)
    if op == "zfill":
        width = rng.choice([-3, 0, 1, len(s), len(s) + 1, len(s) + 5, 30])
        if rng.random() < 0.4:
            s = rng.choice("+-") + s
        return op, [s], [width], lambda: s.zfill(width)
    if op in ("center", "ljust", "rjust"):
        width = rng.choice([-3, 0, 1, len(s), len(s) + 1, len(s) + 2, len(s) + 5, 31, 32])
        fill = None if rng.random() < 0.4 else rng.choice("*-é中\U0001F600 ")
        args = (width,) if fill is None else (width, fill)
        return op, [s, fill], [width], lambda: getattr(s, op)(*args)
    if op == "expandtabs":
        tabsize = rng.choice([None, -2, 0, 1, 2, 4, 8, 8, 13])
        args = () if tabsize is None else (tabsize,)
        return op, [s], [tabsize], lambda: s.expandtabs(*args)
    raise AssertionError(op)


OPS = ["find", "rfind", "count", "index", "rindex", "startswith", "endswith", "startswith_tuple",
       "endswith_tuple", "contains", "strip", "lstrip", "rstrip", "split", "rsplit", "partition",
       "rpartition", "concat", "repeat", "join", "replace", "at", "slice", "zfill", "center",
       "ljust", "rjust", "expandtabs", "len", "compare"]


def encode_str(s):
    return "N" if s is None else "x" + s.encode("utf-8", "surrogatepass").hex()


def encode_int(i):
    return "N" if i is None else str(i)


def main(argv):
    print("version", unicodedata.unidata_version)
    if len(argv) == 2 and argv[1] == "--version":
        return 0
    if len(argv) != 3:
        print("usage: str_oracle.py --version | SEED COUNT", file=sys.stderr)
        return 2
    rng = random.Random(int(argv[1]))
    out = []
    for _ in range(int(argv[2])):
        op, strings, ints, fn = case(rng)
        error, value, parts = run(fn)
        out.append(" ".join([op, str(len(strings))] + [encode_str(s) for s in strings] +
                            [str(len(ints))] + [encode_int(i) for i in ints] +
                            ["=", error, str(value), str(len(parts))] +
                            [encode_str(p) for p in parts]))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
