#!/usr/bin/env python3
"""Generates include/gpumem/strings/detail/unicode_tables.hpp from the running CPython.

The tables hold, for every code point, what CPython's `str` methods see of that character alone:
the flags behind isalpha/isdecimal/isdigit/isnumeric/isspace/islower/isupper/istitle, the Cased
and Case_Ignorable properties of the final-sigma rule, the decimal value int() accepts, and the
full upper, lower, title and casefold mappings. Everything is read from `str` and `unicodedata` of
the interpreter that runs this script, so the header matches that interpreter's Unicode version
(`unicodedata.unidata_version`, recorded in the header).

Usage: python3 scripts/gen-unicode-tables.py [--output PATH]

Layout (what gpumem/strings/unicode.hpp reads):
  * records: deduplicated {flags, case_index[4]} (the index type as narrow as the count of
    case codes allows); flags holds the property bits and, in bits
    12..15, the decimal value. Record 0 is the record of a code point without any property.
  * case_codes: deduplicated int32 codes, one per (mapping kind, character) class. Even codes map
    c to c + code / 2 (one code point). Odd codes say the mapping has 2 or 3 code points, stored at
    multi[c + (code - 1) / 2]: the multi entries of one kind are laid out in code-point order, so a
    run of consecutive characters that all expand shares one code (and one record).
  * a three-stage index: stage1[c >> (s2 + s3)] -> block of stage2 -> block of stage3 -> record.
    The shifts are the ones that make the three arrays smallest.

The script checks its own derivations on every code point (the sigma probes below against the
flags, the decoded tables against the values read from CPython) and fails rather than write a
header that disagrees with the interpreter.
"""
import argparse
import os
import sys
import unicodedata

MAX_CODE_POINT = 0x10FFFF
CAPITAL_SIGMA = "\u03a3"
FINAL_SIGMA = "\u03c2"

# Property bits of a record's flags (unicode.hpp names the same bits).
FLAG_BITS = ["alpha", "decimal", "digit", "numeric", "space", "lower", "upper", "title", "cased",
             "case_ignorable"]
DECIMAL_SHIFT = 12
CASE_KINDS = ["upper", "lower", "title", "fold"]

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_OUTPUT = os.path.join(ROOT, "include", "gpumem", "strings", "detail", "unicode_tables.hpp")


def fail(message):
    sys.exit("gen-unicode-tables: " + message)


def final_sigma_after(text):
    """True when str.lower() turns the capital sigma ending `text` into the final form."""
    return text.lower()[-1] == FINAL_SIGMA


def character_properties(cp):
    """(flags dict, decimal value or -1, [upper, lower, title, fold]) of one code point."""
    ch = chr(cp)
    lower = ch.islower()  # a one-character string: exactly CPython's per-character flag
    upper = ch.isupper()
    title = unicodedata.category(ch) == "Lt"  # CPython's TITLE_MASK
    # The title flag, seen through the string methods: "x" + "a" is lowercase unless x is upper
    # or title; "x" + "A" is uppercase unless x is lower or title.
    if (not (ch + "a").islower()) != (upper or title) or \
            (not (ch + "A").isupper()) != (lower or title):
        fail(f"U+{cp:04X}: the title flag does not follow from islower/isupper")
    cased = lower or upper or title  # Unicode's definition of Cased
    # Case_Ignorable, from the final-sigma rule: a capital sigma right after x is final when x is
    # cased and not ignorable; between "A" and x + "a" it is final when x is neither (an ignorable
    # x is skipped over, whatever its casing).
    after_x = final_sigma_after(ch + CAPITAL_SIGMA)
    before_x = ("A" + CAPITAL_SIGMA + ch + "a").lower()[1] == FINAL_SIGMA
    ignorable = not (after_x or before_x)
    # Check the derivation against the other two contexts the rule distinguishes.
    if after_x != (cased and not ignorable) or \
            final_sigma_after("A" + ch + CAPITAL_SIGMA) != (ignorable or cased) or \
            (("A" + CAPITAL_SIGMA + ch).lower()[1] == FINAL_SIGMA) != (ignorable or not cased):
        fail(f"U+{cp:04X}: Cased/Case_Ignorable disagree with the final-sigma rule")
    flags = {
        "alpha": ch.isalpha(), "decimal": ch.isdecimal(), "digit": ch.isdigit(),
        "numeric": ch.isnumeric(), "space": ch.isspace(), "lower": lower, "upper": upper,
        "title": title, "cased": cased, "case_ignorable": ignorable,
    }
    decimal = unicodedata.decimal(ch, -1)
    if (decimal >= 0) != flags["decimal"] or (decimal >= 0 and int(ch) != decimal):
        fail(f"U+{cp:04X}: the decimal value disagrees with isdecimal()/int()")
    mappings = [ch.upper(), ch.lower(), ch.title(), ch.casefold()]
    if any(not 1 <= len(m) <= 3 for m in mappings):
        fail(f"U+{cp:04X}: a case mapping longer than 3 code points")
    return flags, decimal, mappings


def split_blocks(values, shift):
    """(index, blocks): values cut into blocks of 1 << shift, identical blocks stored once."""
    size = 1 << shift
    seen, index, blocks = {}, [], []
    for start in range(0, len(values), size):
        block = tuple(values[start:start + size])
        if block not in seen:
            seen[block] = len(seen)
            blocks.extend(block)
        index.append(seen[block])
    return index, blocks


def unsigned_type(largest):
    for bits in (8, 16, 32):
        if largest < (1 << bits):
            return f"std::uint{bits}_t", bits // 8
    fail(f"no unsigned type holds {largest}")


def three_stages(values):
    """The smallest three-stage split of `values`: (size, s2, s3, stage1, stage2, stage3)."""
    best = None
    for s3 in range(3, 10):
        mid, stage3 = split_blocks(values, s3)
        for s2 in range(2, 9):
            stage1, stage2 = split_blocks(mid, s2)
            size = (len(stage1) * unsigned_type(max(stage1))[1] +
                    len(stage2) * unsigned_type(max(stage2))[1] +
                    len(stage3) * unsigned_type(max(stage3))[1])
            if best is None or size < best[0]:
                best = (size, s2, s3, stage1, stage2, stage3)
    return best


def build():
    count = MAX_CODE_POINT + 1
    props = [character_properties(cp) for cp in range(count)]

    # Multi-code-point mappings, per kind in code-point order (see the layout above).
    multi, multi_start = [], {}
    for kind in range(len(CASE_KINDS)):
        for cp in range(count):
            mapping = props[cp][2][kind]
            if len(mapping) > 1:
                multi_start[(kind, cp)] = len(multi)
                multi.append([ord(c) for c in mapping])

    def intern(values, positions, value):
        """The position of `value` in `values`, appended the first time it is seen."""
        if value not in positions:
            positions[value] = len(values)
            values.append(value)
        return positions[value]

    case_codes, case_code_positions = [], {}
    records, record_positions = [], {}
    intern(case_codes, case_code_positions, 0)  # code 0 (the identity) first
    intern(records, record_positions, (0, (0, 0, 0, 0)))  # record 0: nothing
    per_code_point = []
    for cp in range(count):
        flags, decimal, mappings = props[cp]
        bits = sum(1 << i for i, name in enumerate(FLAG_BITS) if flags[name])
        if decimal >= 0:
            bits |= decimal << DECIMAL_SHIFT
        indices = []
        for kind, mapping in enumerate(mappings):
            if len(mapping) == 1:
                code = 2 * (ord(mapping) - cp)
            else:
                code = 2 * (multi_start[(kind, cp)] - cp) + 1
            indices.append(intern(case_codes, case_code_positions, code))
        per_code_point.append(intern(records, record_positions, (bits, tuple(indices))))
    if per_code_point[MAX_CODE_POINT] != 0:
        fail("U+10FFFF has properties: record 0 would not be the record of 'nothing'")
    if any(-(1 << 31) > c or c >= (1 << 31) for c in case_codes):
        fail("a case code does not fit in int32")
    if any(0 in m for m in multi):
        fail("a multi-code-point mapping holds U+0000: the count is read from the zero padding")
    if len(FLAG_BITS) > DECIMAL_SHIFT or 9 << DECIMAL_SHIFT >= 1 << 16:
        fail("the flags and the decimal value do not fit in 16 bits")
    stages = three_stages(per_code_point)
    return props, multi, case_codes, records, per_code_point, stages


def decode(cp, tables):
    """What unicode.hpp computes for `cp`, from the tables alone."""
    multi, case_codes, records, (size, s2, s3, stage1, stage2, stage3) = tables
    block = stage1[cp >> (s2 + s3)]
    sub = stage2[(block << s2) | ((cp >> s3) & ((1 << s2) - 1))]
    bits, indices = records[stage3[(sub << s3) | (cp & ((1 << s3) - 1))]]
    flags = {name: bool(bits & (1 << i)) for i, name in enumerate(FLAG_BITS)}
    decimal = bits >> DECIMAL_SHIFT if flags["decimal"] else -1
    mappings = []
    for index in indices:
        code = case_codes[index]
        offset = code >> 1
        if code & 1:
            mappings.append("".join(chr(c) for c in multi[cp + offset]))
        else:
            mappings.append(chr(cp + offset))
    return flags, decimal, mappings


def wrapped(items, separator, indent="      ", width=100):
    """Lines of `indent` + items joined by `separator`, each line at most `width` columns."""
    lines, line = [], indent
    for item in items:
        if line != indent and len(line) + len(separator) + len(item) > width:
            lines.append(line)
            line = indent
        line += ("" if line == indent else separator) + item
    if line != indent:
        lines.append(line)
    return lines


def render(multi, case_codes, records, stages, command):
    size, s2, s3, stage1, stage2, stage3 = stages
    stage1_type = unsigned_type(max(stage1))[0]
    stage2_type = unsigned_type(max(stage2))[0]
    stage3_type = unsigned_type(max(stage3))[0]
    multi_largest = max(max(m) for m in multi)
    multi_type = "std::uint16_t" if multi_largest <= 0xFFFF else "char32_t"
    record_bytes = 2 + 4 * unsigned_type(len(case_codes) - 1)[1]
    data_bytes = (size + len(records) * record_bytes + len(case_codes) * 4 +
                  len(multi) * 3 * (2 if multi_type == "std::uint16_t" else 4))
    version = unicodedata.unidata_version
    out = []
    w = out.append
    w("// gpumem/strings/detail/unicode_tables.hpp")
    w("//")
    w(f"// GENERATED by `{command}` -- do not edit.")
    w(f"// Unicode {version} (CPython {sys.version.split()[0]}), {data_bytes} bytes of tables.")
    w("// The layout is described in scripts/gen-unicode-tables.py; gpumem/strings/unicode.hpp")
    w("// reads it (and holds the device copy: device code cannot read these host arrays).")
    w("#pragma once")
    w("")
    w("#include <gpumem/core/config.hpp>")
    w("")
    w("#include <cstdint>")
    w("")
    w("namespace gpumem::strings::unicode::detail {")
    w("")
    w("GPUMEM_HD constexpr char const* unicode_version() {")
    w(f"  return \"{version}\";")
    w("}")
    w("")
    for i, name in enumerate(FLAG_BITS):
        w(f"inline constexpr std::uint16_t flag_{name} = {1 << i};")
    w(f"inline constexpr unsigned decimal_shift = {DECIMAL_SHIFT};")
    w("")
    w(f"inline constexpr unsigned stage2_shift = {s2};")
    w(f"inline constexpr unsigned stage3_shift = {s3};")
    w("")
    case_index_type, case_index_bytes = unsigned_type(len(case_codes) - 1)
    w("struct char_record {")
    w("  std::uint16_t flags;")
    w(f"  {case_index_type} case_index[4];  // upper, lower, title, fold: into case_codes")
    w("};")
    w("")
    w(f"using multi_unit = {multi_type};")
    w("")
    w("struct unicode_tables {")
    arrays = [
        ("stage1", stage1_type, stage1),
        ("stage2", stage2_type, stage2),
        ("stage3", stage3_type, stage3),
        ("case_codes", "std::int32_t", case_codes),
    ]
    for name, ctype, values in arrays:
        w(f"  {ctype} {name}[{len(values)}];")
    w(f"  char_record records[{len(records)}];")
    w(f"  multi_unit multi[{len(multi)}][3];")
    w("};")
    w("")
    w("// clang-format off")
    w("inline constexpr unicode_tables host_unicode_tables = {")
    # Numbers without spaces: the data is read by the compiler, and it is most of the header.
    bodies = [[f"{v}," for v in values] for _, _, values in arrays]
    bodies.append([f"{{{bits},{{{','.join(str(i) for i in idx)}}}}}," for bits, idx in records])
    bodies.append(["{" + ",".join(str(c) for c in m + [0] * (3 - len(m))) + "}," for m in multi])
    for body in bodies:
        w("    {")
        out.extend(wrapped(body, ""))
        w("    },")
    w("};")
    w("// clang-format on")
    w("")
    w("}  // namespace gpumem::strings::unicode::detail")
    text = "\n".join(out) + "\n"
    too_long = [line for line in out if len(line) > 100]
    if too_long:
        fail(f"a generated line is past 100 columns: {too_long[0]!r}")
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    props, multi, case_codes, records, per_code_point, stages = build()
    tables = (multi, case_codes, records, stages)
    for cp in range(MAX_CODE_POINT + 1):
        if decode(cp, tables) != props[cp]:
            fail(f"U+{cp:04X}: the tables decode to {decode(cp, tables)}, CPython says {props[cp]}")
    command = "python3 scripts/gen-unicode-tables.py"
    if os.path.abspath(args.output) != DEFAULT_OUTPUT:
        command += " --output " + args.output
    text = render(multi, case_codes, records, stages, command)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{args.output}: Unicode {unicodedata.unidata_version}, {len(records)} records, "
          f"{len(case_codes)} case codes, {len(multi)} multi-code-point mappings, "
          f"stage shifts {stages[1]}/{stages[2]}, {stages[0]} bytes of index")


if __name__ == "__main__":
    main()
