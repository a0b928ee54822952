#!/usr/bin/env bash
# Builds gpumem's library and the quickstart example, then runs it. The example picks the backend itself
# (cuda when a GPU is present, else the host backend); set GPUMEM_DEVICE=host|cuda to choose.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUMEM_BUILD_DIR:-build}/quickstart
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_BUILD_TESTS=OFF \
  -DGPUMEM_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target quickstart
"$build/examples/quickstart" "$@"
