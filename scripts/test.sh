#!/usr/bin/env bash
# Builds gpumem and runs its tests, as CI does:
#   1. the main build (warnings are errors; CUDA targets are compiled when a CUDA toolkit is present),
#      then every test: host-backend tests run, GPU-labelled tests run where a GPU is present and are
#      skipped with their reason elsewhere; among them install_consumer and subdirectory_consumer,
#      which build and run a small project against this build (tests/install/consumer), installed
#      with `cmake --install` and found with find_package, and pulled in with add_subdirectory;
#   2. an address+undefined sanitizer build of the host code, running the host tests again.
# Exits non-zero if anything fails to build or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

jobs=$(nproc)
build=${GPUMEM_BUILD_DIR:-build}

echo "== gpumem: main build ($build/main) =="
cmake -S . -B "$build/main" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_WERROR=ON
cmake --build "$build/main" -j "$jobs"
echo "== gpumem: tests (main build) =="
ctest --test-dir "$build/main" --output-on-failure -j "$jobs"

echo "== gpumem: sanitizer build ($build/sanitize, address+undefined, host backend) =="
cmake -S . -B "$build/sanitize" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUMEM_CUDA=OFF \
  -DGPUMEM_SANITIZE=ON -DGPUMEM_WERROR=ON -DGPUMEM_BUILD_BENCH=OFF
cmake --build "$build/sanitize" -j "$jobs"
echo "== gpumem: tests (sanitizer build) =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$build/sanitize" --output-on-failure -j "$jobs" -L host
