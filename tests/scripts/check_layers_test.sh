#!/usr/bin/env bash
# Tests of scripts/check-layers.sh: it must fail, naming the file, the line and the include, on
#   1. a small fake tree with one violation of each kind: an angle include of a later layer, a
#      quoted include of a private header that includes a later layer (the includer is named with
#      the path), an include only a CUDA build takes, one only nvcc takes (__CUDACC__), the CUDA
#      runtime reached through src/cuda's private header from another layer, a folder that is not a
#      layer; and a clean file that must not be named;
#   2. a copy of part of the real tree with one quoted include planted in a private header of
#      src/mr/.
# (That it passes on the real tree is the CTest test `layering`.)
set -euo pipefail
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

put() {  # put FILE LINES...: writes a file of the fake tree
  mkdir -p "$(dirname "$1")"
  local file=$1
  shift
  # The name as its first line: GCC takes two `#pragma once` files of equal text for one.
  printf '%s\n' "// ${file#"$tmp"/}" "$@" >"$file"
}
expect() {  # expect OUTPUT PATTERN: the output has a line matching the extended regex
  if ! grep -qE -- "$2" <<<"$1"; then
    echo "FAIL: no line matches: $2"
    failures=$((failures + 1))
  fi
}
expect_not() {
  if grep -qE -- "$2" <<<"$1"; then
    echo "FAIL: a line matches: $2"
    failures=$((failures + 1))
  fi
}
run_check() {  # run_check ROOT: the script's output; it must exit 1
  local output rc=0
  output=$("$script" "$1" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL: check-layers.sh exited $rc on $1 (expected 1)" >&2
    failures=$((failures + 1))
  fi
  printf '%s\n' "$output"
}

# --- 1. the fake tree ---------------------------------------------------------------------------
fake=$tmp/fake
put "$tmp/cuda/include/cuda_runtime_api.h" '#pragma once'
put "$fake/include/gpumem/core/units.hpp" '#pragma once' '#include <cstddef>'
put "$fake/include/gpumem/core/angle.hpp" '#pragma once' '#include <gpumem/core/units.hpp>' \
  '#include <gpumem/mr/resource.hpp>'
put "$fake/include/gpumem/mr/resource.hpp" '#pragma once' '#include <gpumem/core/units.hpp>'
put "$fake/include/gpumem/manager/context.hpp" '#pragma once'
put "$fake/include/gpumem/nrt/heap.hpp" '#pragma once'
put "$fake/src/mr/pool_state.hpp" '#pragma once' '#include <gpumem/mr/resource.hpp>' \
  '#include <gpumem/manager/context.hpp>'
put "$fake/src/mr/pool.cpp" '#include "pool_state.hpp"'
put "$fake/src/mr/clean.cpp" '#include <gpumem/mr/resource.hpp>' '#include <gpumem/core/units.hpp>'
put "$fake/src/cuda/cuda_check.hpp" '#pragma once' '#if GPUMEM_HAS_CUDA' \
  '#include <cuda_runtime_api.h>' '#endif'
put "$fake/src/manager/uses_cuda.cpp" '#include <gpumem/manager/context.hpp>' \
  '#include "../cuda/cuda_check.hpp"'
put "$fake/src/array/cuda_build.cpp" '#if GPUMEM_HAS_CUDA' '#include <gpumem/nrt/heap.hpp>' '#endif'
put "$fake/src/array/nvcc_only.cu" '#ifdef __CUDACC__' '#include <gpumem/nrt/heap.hpp>' '#endif'
put "$fake/src/widgets/widget.cpp" '#include <gpumem/core/units.hpp>'

out=$(CUDA_HOME=$tmp/cuda run_check "$fake")
echo "$out"
expect "$out" '^include/gpumem/core/angle\.hpp:4: layer violation: .*\(core\) includes include/gpumem/mr/resource\.hpp \(mr\): #include <gpumem/mr/resource\.hpp>$'
expect "$out" '^src/mr/pool_state\.hpp:4: layer violation: .*\(mr\) includes include/gpumem/manager/context\.hpp \(manager\): #include <gpumem/manager/context\.hpp>$'
expect "$out" '^src/mr/pool\.cpp:2: layer violation: .*includes include/gpumem/manager/context\.hpp \(manager\): #include "pool_state\.hpp" through src/mr/pool_state\.hpp -> include/gpumem/manager/context\.hpp$'
expect "$out" '^src/manager/uses_cuda\.cpp:3: CUDA header outside src/cuda: .*cuda_runtime_api\.h: #include "\.\./cuda/cuda_check\.hpp" through src/cuda/cuda_check\.hpp -> '
expect "$out" '^src/array/cuda_build\.cpp:3: layer violation: .*\(array\) includes include/gpumem/nrt/heap\.hpp \(nrt\)'
expect "$out" '^src/array/nvcc_only\.cu:3: layer violation: .*\(array\) includes include/gpumem/nrt/heap\.hpp \(nrt\)'
expect "$out" '^src/widgets/widget\.cpp:0: not a layer of docs/architecture\.md: widgets$'
expect_not "$out" 'clean\.cpp|units\.hpp:|resource\.hpp:|cuda_check\.hpp:'
[ "$(grep -c . <<<"$out")" -eq 7 ] || {
  echo "FAIL: expected 7 lines of violations"
  failures=$((failures + 1))
}
# Without a toolkit, the CUDA build's include still counts: it is read from the text.
out=$(CUDA_HOME=$tmp/none run_check "$fake")
expect "$out" '^src/array/cuda_build\.cpp:3: layer violation'

# --- 2. a copy of the real tree with one planted quoted include -------------------------------
real=$(cd "$(dirname "$0")/../.." && pwd)
# The public headers, src/mr/ and the planted target are enough (and keep the test quick).
mkdir -p "$tmp/real/src/manager"
cp -r "$real/include" "$tmp/real/"
cp -r "$real/src/mr" "$tmp/real/src/"
cp "$real/src/manager/allocation_retry.hpp" "$tmp/real/src/manager/"
planted=$tmp/real/src/mr/resource_support.hpp
[ -f "$planted" ] || { echo "FAIL: $planted is gone: plant elsewhere"; exit 1; }
sed -i '0,/^#include/s//#include "..\/manager\/allocation_retry.hpp"\n&/' "$planted"
line=$(grep -n 'allocation_retry' "$planted" | cut -d: -f1)
out=$(CUDA_HOME=$tmp/none run_check "$tmp/real")
echo "$out"
expect "$out" "^src/mr/resource_support\.hpp:$line: layer violation: .*\\(mr\\) includes src/manager/allocation_retry\\.hpp \\(manager\\): #include \"\\.\\./manager/allocation_retry\\.hpp\"$"
# Its includers in src/mr/ are named too, with the path through it.
expect "$out" '^src/mr/[a-z_]+\.cpp:[0-9]+: layer violation: .* through src/mr/resource_support\.hpp -> src/manager/allocation_retry\.hpp'
expect_not "$out" '^(include|src)/[a-z/_]+\.[a-z]+:[0-9]+: .*(manager|core|cuda)\) includes'

if [ "$failures" -ne 0 ]; then
  echo "check_layers_test: $failures failure(s)"
  exit 1
fi
echo "check_layers_test: ok"
