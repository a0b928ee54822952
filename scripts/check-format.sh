#!/usr/bin/env bash
# Checks that every tracked C/C++/CUDA file (.hpp .cpp .cu .cuh .h) is formatted as .clang-format
# says, and lists the files that are not; also lists lines past the 100-column limit, which
# clang-format leaves alone in verbatim comment lines (see .clang-format), and GoogleTest suite or
# test names that are not snake_case. Exits 1 if anything is listed.
#
# The formatter is clang-format 14 (Debian 12's): other versions format some code differently, so
# the check would depend on the machine. It is installed with apt-get when missing.
# GPUMEM_CLANG_FORMAT=/path/to/clang-format uses another one, at your own risk.
#
# Usage: scripts/check-format.sh [--fix]   (--fix: clang-format -i the files that differ)
set -euo pipefail
cd "$(dirname "$0")/.."
version=14
columns=100

major() { "$1" --version 2>/dev/null | sed -nE 's/.*version ([0-9]+).*/\1/p'; }
find_clang_format() {
  local c
  for c in "clang-format-$version" clang-format; do
    if command -v "$c" >/dev/null 2>&1 && [ "$(major "$c")" = "$version" ]; then
      echo "$c"
      return
    fi
  done
}

clang_format=${GPUMEM_CLANG_FORMAT:-$(find_clang_format)}
if [ -z "$clang_format" ]; then
  echo "check-format: installing clang-format-$version"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "clang-format-$version"
  clang_format=$(find_clang_format)
  [ -n "$clang_format" ] || { echo "check-format: no clang-format $version" >&2; exit 2; }
fi

mapfile -d '' files < <(git ls-files -z -- '*.hpp' '*.cpp' '*.cu' '*.cuh' '*.h')
[ ${#files[@]} -gt 0 ] || { echo "check-format: no files (not a git checkout?)" >&2; exit 2; }

# clang-format prints `file:line:col: error: code should be clang-formatted` for each difference.
mapfile -t differ < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 16 -P "$(nproc)" "$clang_format" --dry-run --Werror 2>&1 |
  sed -nE 's/^(.+):[0-9]+:[0-9]+: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ "${1:-}" = "--fix" ] && [ ${#differ[@]} -gt 0 ]; then
  "$clang_format" -i "${differ[@]}"
  echo "check-format: formatted ${differ[*]}"
  differ=()
fi
mapfile -t long < <(LC_ALL=C.UTF-8 grep -nE "^.{$((columns + 1)),}" "${files[@]}" | cut -d: -f1,2)
# GoogleTest suites and tests are snake_case, as everything else.
test_macro='\b(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\(\s*'
mapfile -t camel < <(git ls-files -z -- 'tests/*' | xargs -0 grep -nE \
  "${test_macro}[A-Za-z0-9_]*[A-Z]|${test_macro}[A-Za-z0-9_]+\s*,\s*[A-Za-z0-9_]*[A-Z]" |
  cut -d: -f1,2 || true)

status=0
if [ ${#differ[@]} -gt 0 ]; then
  echo "check-format: not formatted as .clang-format says ($($clang_format --version)):"
  printf '  %s\n' "${differ[@]}"
  echo "  fix: scripts/check-format.sh --fix"
  status=1
fi
if [ ${#long[@]} -gt 0 ]; then
  echo "check-format: lines longer than $columns columns (wrap them by hand):"
  printf '  %s\n' "${long[@]}"
  status=1
fi
if [ ${#camel[@]} -gt 0 ]; then
  echo "check-format: test suites or tests not in snake_case:"
  printf '  %s\n' "${camel[@]}"
  status=1
fi
[ $status -ne 0 ] || echo "format: ok (${#files[@]} files, $clang_format)"
exit $status
