#!/usr/bin/env bash
# Makes sure gpumem's build tools are present and new enough (Debian/Ubuntu), installing what is
# not: a C++17 compiler (g++, or $CXX when set), CMake at least the version CMakeLists.txt asks for,
# Ninja, GoogleTest, and what the Python package needs to build and test (python3 with venv and
# pip; nanobind, scikit-build-core, pytest, numpy and matplotlib, installed with pip for python3
# when missing). The CUDA toolkit is optional (without it only the host backend is built) and is
# not installed here. Prints nothing and takes a moment when everything is in place.
#
#   scripts/install-deps.sh               # everything scripts/test.sh needs
#   scripts/install-deps.sh --no-python   # the C++ build alone (scripts/quickstart.sh): no pip
#
# Missing tools come from apt-get. When the distribution's CMake is older than the minimum, the
# `cmake` package from pip is installed into $GPUMEM_TOOLS_DIR (/opt/gpumem-tools) and its cmake,
# ctest and cpack are linked into $GPUMEM_TOOLS_BIN (/usr/local/bin, which Debian and Ubuntu put
# before /usr/bin on PATH), so every later `cmake` of the calling script is that one. The script
# fails, saying why, if a tool on PATH is still missing or too old afterwards.
set -euo pipefail
python=1
for arg in "$@"; do
  case "$arg" in
    --no-python) python=0 ;;
    *)
      echo "install-deps: unknown argument $arg (usage: install-deps.sh [--no-python])" >&2
      exit 2
      ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
tools_dir=${GPUMEM_TOOLS_DIR:-/opt/gpumem-tools}
tools_bin=${GPUMEM_TOOLS_BIN:-/usr/local/bin}
cxx=${CXX:-g++}

cmake_min=$(sed -nE 's/^cmake_minimum_required\(VERSION ([0-9.]+).*/\1/p' "$root/CMakeLists.txt")
if [ -z "$cmake_min" ]; then
  echo "install-deps: no cmake_minimum_required(VERSION ...) in $root/CMakeLists.txt" >&2
  exit 1
fi

# version_at_least HAVE WANT
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }
# cmake_version [BINARY]; cmake_ok [BINARY]: the version of `cmake` on PATH (or BINARY), and
# whether it is at least the minimum.
cmake_version() { "${1:-cmake}" --version 2>/dev/null | sed -nE '1s/^cmake version ([0-9.]+).*/\1/p'; }
cmake_ok() {
  local v
  v=$(cmake_version "$@")
  [ -n "$v" ] && version_at_least "$v" "$cmake_min"
}
cxx17_ok() {
  command -v "$cxx" >/dev/null 2>&1 &&
    printf '#include <optional>\n#include <string_view>\n#if __cplusplus < 201703L\n#error C++17\n#endif\nint main() {}\n' |
    "$cxx" -std=c++17 -fsyntax-only -x c++ - >/dev/null 2>&1
}
any_exists() {
  local f
  for f in "$@"; do [ -e "$f" ] && return 0; done
  return 1
}
gtest_ok() {
  any_exists /usr/include/gtest/gtest.h /usr/local/include/gtest/gtest.h &&
    any_exists /usr/lib/libgtest.* /usr/lib/*/libgtest.* /usr/local/lib/libgtest.* \
      /usr/local/lib/*/libgtest.*
}

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_updated=0
apt_install() {
  echo "install-deps: apt-get install $*"
  if [ $apt_updated -eq 0 ]; then
    $sudo apt-get update -q
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@"
}

packages=()
cxx17_ok || packages+=(g++)
command -v cmake >/dev/null 2>&1 || packages+=(cmake)
command -v ninja >/dev/null 2>&1 || packages+=(ninja-build)
gtest_ok || packages+=(libgtest-dev)
[ ${#packages[@]} -eq 0 ] || apt_install "${packages[@]}"

if ! cmake_ok && ! cmake_ok "$tools_bin/cmake"; then
  echo "install-deps: CMake $(cmake_version) is older than $cmake_min (CMakeLists.txt): installing" \
    "CMake from pip into $tools_dir"
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  # --target: a directory of its own, outside any Python environment (so no PEP 668 refusal); the
  # wheel carries the native binaries, which find their modules through their real path.
  $sudo env PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet \
    --disable-pip-version-check --upgrade --target "$tools_dir/cmake" "cmake>=$cmake_min"
  # The native binaries' directory, as the package names it (its bin/cmake is a Python wrapper).
  bin=$(PYTHONPATH="$tools_dir/cmake" python3 -c 'import cmake; print(cmake.CMAKE_BIN_DIR)')
  $sudo mkdir -p "$tools_bin"
  for tool in cmake ctest cpack; do
    $sudo ln -sf "$bin/$tool" "$tools_bin/$tool"
  done
  hash -r
fi

# The Python package (scripts/test.sh installs it with --no-build-isolation, so its build
# requirements must be importable by python3, and its extension needs Python's headers).
if [ $python -eq 1 ]; then
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_install python3-venv
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
    apt_install python3-dev
  python_missing=()
  for module in nanobind:nanobind scikit_build_core:scikit-build-core pytest:pytest numpy:numpy \
    matplotlib:matplotlib; do
    python3 -c "import ${module%%:*}" >/dev/null 2>&1 || python_missing+=("${module#*:}")
  done
  if [ ${#python_missing[@]} -gt 0 ]; then
    echo "install-deps: pip install ${python_missing[*]}"
    # --break-system-packages is needed where the distribution marks its Python as externally
    # managed (PEP 668); older pips do not know the option and need none.
    pip_flags=(--quiet --disable-pip-version-check)
    python3 -m pip install --help 2>/dev/null | grep -q -- --break-system-packages &&
      pip_flags+=(--break-system-packages)
    # The python3 on PATH (a virtual environment's, say), by its path: sudo would look it up on its
    # own secure_path, and install into the system's Python instead. sudo only where that Python's
    # packages are not writable by the caller.
    py=$(command -v python3)
    pip_sudo=$sudo
    "$py" -c 'import os, sys, sysconfig
sys.exit(not os.access(sysconfig.get_paths()["purelib"], os.W_OK))' && pip_sudo=""
    $pip_sudo env PIP_ROOT_USER_ACTION=ignore "$py" -m pip install "${pip_flags[@]}" \
      "${python_missing[@]}"
  fi
fi

failed=0
if ! cmake_ok; then
  echo "install-deps: \`cmake\` on PATH ($(command -v cmake || echo none), version" \
    "$(cmake_version)) is older than $cmake_min; a newer one is in $tools_bin: put it first" \
    "on PATH" >&2
  failed=1
fi
if ! cxx17_ok; then
  echo "install-deps: $cxx cannot compile C++17: install a newer compiler (GCC >= 8)" \
    "or set CXX to one" >&2
  failed=1
fi
command -v ninja >/dev/null 2>&1 || {
  echo "install-deps: ninja is not on PATH" >&2
  failed=1
}
gtest_ok || {
  echo "install-deps: GoogleTest (gtest/gtest.h and libgtest) not found" >&2
  failed=1
}
if [ $python -eq 1 ]; then
  for module in nanobind scikit_build_core pytest numpy matplotlib; do
    python3 -c "import $module" >/dev/null 2>&1 || {
      echo "install-deps: the Python module $module is still missing for python3" >&2
      failed=1
    }
  done
fi
exit $failed
