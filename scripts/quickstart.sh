#!/usr/bin/env bash
# Builds gpumem's library and the string UDF example, then runs it: a Python string UDF
# ((s.upper() if len(s) > 2 else s + s) + "abc") on every line of a text file, on the GPU, with the
# first rows, the time and the memory picture (device heap, NRT statistics, memory manager).
#
#   scripts/quickstart.sh                 # examples/data/strings.txt
#   scripts/quickstart.sh words.txt       # any UTF-8 text file, one row per line
#
# The example picks the backend itself (cuda when a GPU is present, else the host backend); set
# GPUMEM_DEVICE=host|cuda to choose. The memory-manager tour of earlier versions is still built:
# "$build/examples/quickstart".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-python  # the C++ build alone
build=${GPUMEM_BUILD_DIR:-build}/quickstart
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_BUILD_TESTS=OFF \
  -DGPUMEM_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target string_udf quickstart
"$build/examples/string_udf" "$@"
