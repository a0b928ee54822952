#!/usr/bin/env bash
# The GPU check: on a CUDA machine, in one command,
#   1. configure and build everything for sm_90 (warnings are errors),
#   2. run every test (host-labelled and gpu-labelled; gpu tests on the cuda backend),
#   3. run every benchmark (bench_*),
#   3b. install the Python package and run its tests, numba-cuda's memory tests and bench/python_alloc.py,
#   4. run the gpu-labelled test executables under compute-sanitizer (memcheck; racecheck for nrt and
#      the strings transform),
#      last: the slowest part, so a run cut off by a time limit still has the figures;
#   5. print a short summary table last.
# Logs go to build/gpu-check/ and, when $OUT is set (the device tool's output folder, which takes back only
# a few files), into one archive $OUT/gpu-check-logs.tgz plus $OUT/summary.txt. Exit status: non-zero when a
# step failed. Never touches the GPU's settings.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=$root/build/gpu-check
rm -rf "$out"
mkdir -p "$out"
build=${GPUMEM_GPU_BUILD_DIR:-$root/build/gpu}
jobs=$(nproc)
declare -a rows=()
status=0

step() {  # step NAME LOGFILE command...
  local name=$1 log=$2
  shift 2
  local start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  rows+=("$(printf '%-34s %-6s %5ss  %s' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL:$rc)" "$took" "$(basename "$log")")")
  [ $rc -eq 0 ] || status=1
  # Keep the archive current after every step, so a run cut off by a time limit still returns its logs.
  [ -z "${OUT:-}" ] || tar czf "$OUT/gpu-check-logs.tgz" -C "$out" . 2>/dev/null
  return $rc
}

{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader || true
  # The device tool copies the working tree, whose git metadata may be older than the tree: the
  # caller names the commit it sent in GPUMEM_COMMIT when it can.
  echo "${GPUMEM_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo "unknown (not a git checkout)")}"
} >"$out/device.txt" 2>&1

# RMM's pool and arena as bench_alloc competitors: librmm and rapids-logger wheels in .whl/ (the
# GPU machine has no package registry; docs/benchmarks.md says how to fetch them), unpacked here.
rmm=()
if compgen -G ".whl/librmm*.whl" >/dev/null && compgen -G ".whl/rapids_logger*.whl" >/dev/null; then
  rm -rf "$root/build/rmm-site"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$root/build/rmm-site" \
    .whl/librmm*.whl .whl/rapids_logger*.whl >"$out/rmm-install.log" 2>&1 &&
    rmm=(-DGPUMEM_RMM_ROOT="$root/build/rmm-site")
fi

# GPUMEM_CHECK_SKIP leaves parts out (a machine lent for a limited time per command may need the
# check split over runs): any of "build" (configure and build; then no CTest or sanitizer runs and no C++
# benchmarks), "tests", "bench", "python", "sanitizers".
skip=" ${GPUMEM_CHECK_SKIP:-} "
[[ "$skip" == *" build "* ]] && skip="$skip tests sanitizers "

if [[ "$skip" != *" build "* ]]; then
  step configure "$out/configure.log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DGPUMEM_CUDA=ON -DGPUMEM_WERROR=ON -DGPUMEM_BUILD_TESTS=ON \
  -DGPUMEM_BUILD_EXAMPLES=ON -DGPUMEM_BUILD_BENCH=ON -DGPUMEM_BUILD_TOOLS=ON "${rmm[@]}"
  step build "$out/build.log" cmake --build "$build" -j "$jobs"
fi

if [[ "$skip" != *" tests "* ]]; then
  # --no-tests=error: a build folder configured without tests (another script's) must not pass.
  step "tests (host label)" "$out/ctest-host.log" ctest --test-dir "$build" -L host -j "$jobs" \
    --output-on-failure --no-tests=error
  step "tests (gpu label, cuda backend)" "$out/ctest-gpu.log" ctest --test-dir "$build" -L gpu -j 4 \
    --output-on-failure --no-tests=error
fi


# Benchmarks: each prints its own table; keep them all in one log and show their tails.
: >"$out/bench.log"
# GPUMEM_CHECK_BENCHES="bench_string_udf bench_device_heap" runs only those (default: every bench_*).
benches=("$build"/bench/bench_*)
if [ -n "${GPUMEM_CHECK_BENCHES:-}" ]; then
  benches=()
  for b in $GPUMEM_CHECK_BENCHES; do benches+=("$build/bench/$b"); done
fi
for bench in "${benches[@]}"; do
  [[ "$skip" == *" bench "* || "$skip" == *" build "* ]] && break
  name=$(basename "$bench")
  # A benchmark named in GPUMEM_CHECK_BENCHES that was not built (or none built at all) fails.
  [ -x "$bench" ] || { step "$name (not built)" "$out/$name.log" false; continue; }
  step "$name" "$out/$name.log" env GPUMEM_DEVICE=cuda timeout 300 "$bench"
  { echo "===== $name"; cat "$out/$name.log"; } >>"$out/bench.log"
done

# The Python package on the GPU: built with the cuda backend and installed (no registry there:
# --no-build-isolation, the build requirements come from the machine), then its own tests with the
# frameworks present, numba-cuda's memory-management tests with gpumem as Numba's memory manager
# (and, to compare, with Numba's own), and bench/python_alloc.py.
if [[ "$skip" != *" python "* ]] && command -v python3 >/dev/null; then
  # One libstdc++ per process: a compiler that links it statically into libgpumem.so and the
  # extension (as a toolchain wrapper in /opt may) gives each its own copy beside the system's that
  # numpy and the frameworks load, and a C++ exception crossing them crashes. The system g++ links
  # it dynamically; use it when present, as the CUDA host compiler too (CUDAHOSTCXX: the
  # cmake.define alone left CMake on the wrapper, whose implicit link libraries then brought the
  # static libstdc++ into libgpumem.so, which has CUDA sources).
  wheel_cxx=()
  if [ -x /usr/bin/g++ ] && [ -x /usr/bin/gcc ]; then
    wheel_cxx=(CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++)
    wheel_cuda_host=(-C cmake.define.CMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
  else
    wheel_cuda_host=()
  fi
  rm -rf "$root/build/python"  # scikit-build-core's build folder: a fresh configure with this compiler
  step "python package (pip install)" "$out/python-install.log" env PIP_BREAK_SYSTEM_PACKAGES=1 "${wheel_cxx[@]}" \
    python3 -m pip install -v --no-build-isolation --no-deps \
    -C cmake.define.GPUMEM_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 "${wheel_cuda_host[@]}" .
  # A folder on PYTHONPATH for the runs below. Its sitecustomize gives numpy back `row_stack` (an
  # alias of vstack, removed in numpy 2.4) where numpy lacks it, once numpy is imported (nothing is
  # imported ahead: a test checks that importing gpumem imports no framework): the numba-cuda
  # releases that overload it cannot compile a kernel otherwise. numba-cuda's test helpers import
  # `filecheck`; the GPU machine lacks it: a wheel in .whl/ is unpacked there (docs/benchmarks.md
  # says how to fetch the wheels).
  rm -rf "$root/build/py-extra"
  mkdir -p "$root/build/py-extra"
  cat >"$root/build/py-extra/sitecustomize.py" <<'PY'
import importlib.abc
import importlib.machinery
import sys


class _NumpyRowStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "numpy":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if not hasattr(module, "row_stack"):
                module.row_stack = module.vstack

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NumpyRowStack())
PY
  py_extra=(PYTHONPATH="$root/build/py-extra${PYTHONPATH:+:$PYTHONPATH}")
  if compgen -G ".whl/filecheck*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$root/build/py-extra" \
      .whl/filecheck*.whl >"$out/py-extra-install.log" 2>&1
  fi
  step "python tests (gpu)" "$out/python-pytest.log" env -C /tmp "${py_extra[@]}" GPUMEM_TEST_GPU=1 \
    GPUMEM_DEVICE=cuda timeout 300 python3 -m pytest -v -rs -p no:cacheprovider "$root/python/tests"
  numba_tests=(numba.cuda.tests.cudadrv.test_emm_plugins numba.cuda.tests.cudadrv.test_deallocations
    numba.cuda.tests.cudadrv.test_managed_alloc numba.cuda.tests.cudapy.test_ipc)
  step "numba EMM tests (gpumem.numba)" "$out/numba-gpumem.log" env -C /tmp "${py_extra[@]}" \
    NUMBA_CUDA_MEMORY_MANAGER=gpumem.numba timeout 300 python3 -m unittest "${numba_tests[@]}"
  step "numba EMM tests (Numba's own)" "$out/numba-default.log" env -C /tmp "${py_extra[@]}" \
    timeout 300 python3 -m unittest "${numba_tests[@]}"
  if [[ "$skip" != *" bench "* ]]; then
    step "bench python_alloc.py" "$out/bench_python_alloc.log" env -C /tmp timeout 300 \
      python3 "$root/bench/python_alloc.py"
    { echo "===== python_alloc.py"; cat "$out/bench_python_alloc.log"; } >>"$out/bench.log"
  fi
fi

# compute-sanitizer on every gpu-labelled test executable.
tests=$(ctest --test-dir "$build" -L gpu --show-only=json-v1 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(t["command"][0] for t in d["tests"]))')
if [[ -z "$tests" && "$skip" != *" sanitizers "* ]]; then
  step "compute-sanitizer (no gpu-labelled tests found)" "$out/memcheck-none.log" false
fi
for exe in $tests; do
  [[ "$skip" == *" sanitizers "* ]] && break
  name=$(basename "$exe")
  step "memcheck $name" "$out/memcheck-$name.log" env GPUMEM_DEVICE=cuda GPUMEM_UNDER_SANITIZER=1 \
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check full --report-api-errors no "$exe"
  case $name in
    *nrt* | *transform*) step "racecheck $name" "$out/racecheck-$name.log" env GPUMEM_DEVICE=cuda \
             GPUMEM_UNDER_SANITIZER=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 99 "$exe" ;;
  esac
done

echo
echo "===== failures (tails)"
for log in "$out"/*.log; do
  if grep -qE 'FAILED|Failed|ERROR SUMMARY: [1-9]|error:' "$log" 2>/dev/null; then
    echo "--- $(basename "$log")"
    grep -E 'FAILED|Failed|ERROR SUMMARY|error:|Error|Expected|Which is|Value of' "$log" | head -25
  fi
done
echo
echo "===== benchmarks"
cat "$out/bench.log" | tail -c 6000
echo
{
  echo "===== gpu-check summary ($(head -1 "$out/device.txt"), commit $(tail -1 "$out/device.txt"))"
  printf '%s\n' "${rows[@]}"
} | tee "$out/summary.txt"
if [ -n "${OUT:-}" ]; then
  cp "$out/summary.txt" "$OUT/summary.txt"
  tar czf "$OUT/gpu-check-logs.tgz" -C "$out" .
fi
exit $status
