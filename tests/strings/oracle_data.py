#!/usr/bin/env python3
"""The committed oracle answers of the strings tests: writes them, or checks that they are current.

    python3.11 tests/strings/oracle_data.py write    regenerates tests/strings/data/*.txt
    python3 tests/strings/oracle_data.py check       exit 0: every file is what its oracle prints
                                                     now; 1: one differs (stale or edited);
                                                     77: this CPython's Unicode is not the tables'
                                                     (nothing to compare with: a skip)

test_strings_functions and test_strings_case compare with these files for their default seed, so
they need no Python and compare on every machine, whatever its CPython. Each file is the oracle's
output for that seed (its first line "version <Unicode version>", then one case a line) after one
header line, starting with "#", that names the command, the seed and the Unicode version. Only a
CPython whose Unicode is the tables' (include/gpumem/strings/detail/unicode_tables.hpp: 14.0.0,
CPython 3.11) may write them. The CTest test strings_oracle_data runs `check`.
"""
import os
import re
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TABLES = os.path.join(ROOT, "include", "gpumem", "strings", "detail", "unicode_tables.hpp")

# file -> (oracle, its arguments, the seed). The seeds and counts are the tests' defaults for the
# committed data (functions_test.cu: default_seed, committed_case_count; case_convert_test.cu:
# default_seed, committed_strings); the counts keep each file near 500 KB.
DATA = {
    "functions_cases.txt": ("str_oracle.py", ["20261124", "4000"], "20261124"),
    "case_cases.txt": ("case_oracle.py", ["--seed", "1", "--count", "120"], "1"),
}


def tables_version():
    with open(TABLES, encoding="utf-8") as f:
        m = re.search(r'unicode_version\(\)\s*\{\s*return\s*"([^"]+)"', f.read())
    if m is None:
        sys.exit("oracle_data.py: no unicode_version() in " + TABLES)
    return m.group(1)


def generate(name):
    """The file's text as this CPython makes it: the header line, then the oracle's output."""
    oracle, args, seed = DATA[name]
    out = subprocess.run([sys.executable, os.path.join(HERE, oracle)] + args, check=True,
                         stdout=subprocess.PIPE).stdout.decode("utf-8")
    header = "# tests/strings/%s %s: seed %s, CPython's Unicode %s (written by " \
             "tests/strings/oracle_data.py write; do not edit)\n" % (
                 oracle, " ".join(args), seed, unicodedata.unidata_version)
    return header + out


def first_difference(a, b):
    a_lines, b_lines = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(a_lines, b_lines)):
        if x != y:
            return "line %d:\n  committed:   %s\n  regenerated: %s" % (i + 1, x[:200], y[:200])
    return "line %d: one of them ends there (%d lines committed, %d regenerated)" % (
        min(len(a_lines), len(b_lines)) + 1, len(a_lines), len(b_lines))


def main(argv):
    if len(argv) != 2 or argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    tables = tables_version()
    if unicodedata.unidata_version != tables:
        message = "this CPython (%s) has Unicode %s, gpumem's tables are Unicode %s" % (
            sys.version.split()[0], unicodedata.unidata_version, tables)
        if argv[1] == "write":
            print("oracle_data.py: cannot write: %s; run it with a CPython whose Unicode is %s "
                  "(CPython 3.11 has 14.0.0)" % (message, tables), file=sys.stderr)
            return 1
        print("skipped: %s: nothing to compare the committed data with" % message)
        return 77
    data_dir = os.path.join(HERE, "data")
    stale = 0
    for name in sorted(DATA):
        path = os.path.join(data_dir, name)
        text = generate(name)
        if argv[1] == "write":
            os.makedirs(data_dir, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print("wrote %s (%d bytes)" % (path, len(text.encode("utf-8"))))
            continue
        try:
            with open(path, encoding="utf-8", newline="") as f:
                committed = f.read()
        except OSError as e:
            print("%s: cannot read: %s" % (path, e))
            stale += 1
            continue
        if committed == text:
            print("%s: current (%d lines)" % (name, text.count("\n")))
        else:
            stale += 1
            print("%s differs from what %s prints now, at %s\nregenerate with: python3.11 "
                  "tests/strings/oracle_data.py write" % (path, DATA[name][0],
                                                          first_difference(committed, text)))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
