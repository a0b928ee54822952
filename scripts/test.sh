#!/usr/bin/env bash
# Builds gpumem and runs its tests, as CI does:
#   1. the format check (scripts/check-format.sh: clang-format 14 over every tracked C++/CUDA file);
#   2. the main build (warnings are errors; CUDA targets are compiled when a CUDA toolkit is present),
#      then every test: host-backend tests run, GPU-labelled tests run where a GPU is present and are
#      skipped with their reason elsewhere; among them install_consumer and subdirectory_consumer,
#      which build and run a small project against this build (tests/install/consumer), installed
#      with `cmake --install` and found with find_package, and pulled in with add_subdirectory;
#   3. an address+undefined sanitizer build of the host code, validating (GPUMEM_VALIDATE: asserts
#      on, full-structure checks after every operation of the stress tests), running the host tests
#      again;
#   4. a thread sanitizer build of the host code, running the tests of the concurrent parts: the
#      pool and its lock, the resource contract suite, the deferred-deallocation queue (manager
#      tests), the device heap, the NRT, the strings transform (concurrent calls) and the spill
#      stress test (test_buffer_stress) on the host backend;
#   5. the Python package: `pip install .` (without build isolation, from the build requirements
#      install-deps.sh put in place) into a virtual environment, $build/venv, then pytest on
#      python/tests with the host backend (GPU and framework tests skip, saying why). The package
#      builds its own libgpumem.so (nothing is shared with the CMake builds above), host-only unless
#      GPUMEM_PYTHON_CUDA=ON, and without tests or benchmarks, so the stage stays short; its build
#      directory (build/python/) makes a second run incremental.
# Exits non-zero if anything fails to build or any test fails. Prints the time of each stage.
set -euo pipefail
cd "$(dirname "$0")/.."

stage_times=()
stage_name=""
stage_start=$SECONDS
stage() {  # stage NAME: ends the current stage (noting its time) and starts NAME ("" ends all)
  local took=$((SECONDS - stage_start))
  [ -z "$stage_name" ] || stage_times+=("$(printf '%5ss  %s' "$took" "$stage_name")")
  stage_name=$1
  stage_start=$SECONDS
  [ -z "$stage_name" ] || echo "== gpumem: $stage_name =="
}
report_times() {
  stage ""
  echo "== gpumem: stage times =="
  printf '%s\n' "${stage_times[@]}"
}
trap report_times EXIT

stage "format (scripts/check-format.sh)"
scripts/check-format.sh
stage "build tools (scripts/install-deps.sh)"
scripts/install-deps.sh

jobs=$(nproc)
build=${GPUMEM_BUILD_DIR:-build}

stage "main build ($build/main)"
cmake -S . -B "$build/main" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_WERROR=ON
cmake --build "$build/main" -j "$jobs"
stage "tests (main build)"
ctest --test-dir "$build/main" --output-on-failure -j "$jobs"

stage "sanitizer build ($build/sanitize, address+undefined, validating, host backend)"
cmake -S . -B "$build/sanitize" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUMEM_CUDA=OFF \
  -DGPUMEM_SANITIZE=address,undefined -DGPUMEM_VALIDATE=ON -DGPUMEM_WERROR=ON \
  -DGPUMEM_BUILD_BENCH=OFF
cmake --build "$build/sanitize" -j "$jobs"
stage "tests (sanitizer build)"
# -LE script: the source checks (layering) ran in the main build; they do not depend on flags.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$build/sanitize" --output-on-failure -j "$jobs" -L host -LE script

# Only the test executables of the concurrent parts are built (and their libraries): TSan slows
# code about tenfold, and CI has two cores. RelWithDebInfo: optimised, still with line numbers.
tsan_tests=(test_mr_pool test_mr_pool_extents test_mr_contract test_manager test_nrt test_strings_transform test_buffer_stress)
stage "thread sanitizer build ($build/tsan, host backend: ${tsan_tests[*]})"
cmake -S . -B "$build/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_CUDA=OFF \
  -DGPUMEM_SANITIZE=thread -DGPUMEM_WERROR=ON -DGPUMEM_BUILD_BENCH=OFF -DGPUMEM_BUILD_EXAMPLES=OFF
cmake --build "$build/tsan" -j "$jobs" --target "${tsan_tests[@]}"
stage "tests (thread sanitizer build)"
# Left out: pool_stress.catches_a_pool_whose_stream_ordering_is_broken races by design. Its backend
# claims that every stream and event has completed, so the pool hands out blocks that the streams'
# worker threads are still filling and copying: the data races the test exists to show (through its
# model and patterns) are real, and TSan reports them.
# allocator_may_return_null: the contract suite asks for more pinned memory than exists; TSan's
# allocator would stop the process at such a size instead of failing the allocation.
GTEST_FILTER='-pool_stress.catches_a_pool_whose_stream_ordering_is_broken' \
  TSAN_OPTIONS=allocator_may_return_null=1:second_deadlock_stack=1 \
  ctest --test-dir "$build/tsan" --output-on-failure -j "$jobs" \
  -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\.host\$"

stage "python package (pip install . into $build/venv; pytest python/tests, host backend)"
# --system-site-packages: the venv sees the build requirements and pytest that install-deps.sh
# installed for python3, so nothing is downloaded here; the package itself goes into the venv.
python3 -m venv --system-site-packages "$build/venv"
venv_python=$(cd "$build/venv" && pwd)/bin/python
CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$venv_python" -m pip install --quiet \
  --disable-pip-version-check --no-build-isolation \
  -C "cmake.define.GPUMEM_CUDA=${GPUMEM_PYTHON_CUDA:-OFF}" .
# The Dask tests (python/tests/test_dask.py) need dask and distributed: pinned, into the venv only
# (they skip, saying why, where these are absent). Pure-Python wheels: a few seconds, once.
"$venv_python" -m pip install --quiet --disable-pip-version-check \
  dask==2026.7.1 distributed==2026.7.1
stage "tests (python package)"
# From outside the source tree, so that `import gpumem` finds the installed package.
tests_dir=$PWD/python/tests
(cd "$build" && GPUMEM_DEVICE=host "$venv_python" -m pytest -rs -p no:cacheprovider "$tests_dir")
