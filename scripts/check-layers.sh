#!/usr/bin/env bash
# Checks the include rule of docs/architecture.md on the include graph the compiler sees:
#
#   * a layer includes only itself and the layers before it in this order:
#       core cuda mr manager array nrt buffer column strings frame interop python
#     (a file of include/gpumem/<layer>/ or src/<layer>/ belongs to <layer>; a file directly in
#     include/gpumem/ or src/ comes after every layer: it may include any, none may include it);
#   * only src/cuda/ includes the CUDA runtime/driver headers (cuda_runtime.h, cuda_runtime_api.h,
#     cuda.h, driver_types.h), directly or through gpumem's own headers. (Through a toolkit header
#     such as CCCL's <cuda/stream_ref> it is the toolkit's business.)
#
# How: every source and header under include/gpumem/ and src/ is preprocessed on its own with
# `$CXX -E -H` (the compiler prints each header it opens, nested), so quoted includes, transitive
# paths and the preprocessor's conditions count. Twice: as a host-only build (GPUMEM_HAS_CUDA=0)
# and, where a CUDA toolkit is found ($CUDA_HOME, else nvcc's, else /usr/local/cuda), as a CUDA
# build (GPUMEM_HAS_CUDA=1, the toolkit and its CCCL on the include path). The #include lines of
# each file are also read as text, so an include in a branch neither build takes (__CUDACC__)
# still counts. Needs bash, python3 and a GCC or Clang ($CXX, default c++).
#
# Usage: scripts/check-layers.sh [ROOT]   (ROOT: a tree with include/gpumem/ and src/; default this
# repository). Prints each violation as `file:line: ...` naming the include; exits 1 if any.
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cuda_home=${CUDA_HOME:-}
if [ -z "$cuda_home" ]; then
  nvcc=$(command -v nvcc || true)
  cuda_home=${nvcc:+$(dirname "$(dirname "$nvcc")")}
  cuda_home=${cuda_home:-/usr/local/cuda}
fi
exec python3 - "$root" "${CXX:-c++}" "$cuda_home" <<'PY'
import concurrent.futures
import os
import re
import subprocess
import sys

root = os.path.realpath(sys.argv[1])
cxx, cuda_home = sys.argv[2], sys.argv[3]
LAYERS = "core cuda mr manager array nrt buffer column strings frame interop python".split()
TOP = len(LAYERS)  # files directly in include/gpumem/ or src/
CUDA_HEADERS = {"cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "driver_types.h"}
EXTENSIONS = (".hpp", ".h", ".cpp", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def rel(path):
    return os.path.relpath(os.path.realpath(path), root)


def layer_of(path):
    """(layer name, rank) of a path relative to root; None when it is not in a layer folder."""
    parts = path.split("/")
    if parts[:2] == ["include", "gpumem"]:
        parts = parts[2:]
    elif parts[:1] == ["src"]:
        parts = parts[1:]
    else:
        return None
    if len(parts) == 1:
        return ("top", TOP)
    name = parts[0]
    return (name, LAYERS.index(name)) if name in LAYERS else (name, TOP + 1)


def in_repo(path):
    return not path.startswith("../")


files = []
for base in ("include/gpumem", "src"):
    for dirpath, _, names in os.walk(os.path.join(root, base)):
        files += [rel(os.path.join(dirpath, n)) for n in names if n.endswith(EXTENSIONS)]
files.sort()

configs = [["-DGPUMEM_HAS_CUDA=0"]]
if os.path.isfile(os.path.join(cuda_home, "include", "cuda_runtime_api.h")):
    inc = os.path.join(cuda_home, "include")
    configs.append(["-DGPUMEM_HAS_CUDA=1", "-I" + inc, "-I" + os.path.join(inc, "cccl")])


def include_lines(path):
    """[(line number, spelling, name, resolved path or None)] of the file's #include lines."""
    out = []
    with open(os.path.join(root, path), errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quoted, name = m.group(1) == '"', m.group(2)
            candidates = [os.path.join(os.path.dirname(path), name)] if quoted else []
            candidates.append(os.path.join("include", name))
            found = next((c for c in candidates if os.path.isfile(os.path.join(root, c))), None)
            spelled = '#include "%s"' % name if quoted else "#include <%s>" % name
            out.append((number, spelled, name, rel(os.path.join(root, found)) if found else None))
    return out


def accepts(flag):
    probe = [cxx, flag, "-E", "-x", "c++", "-o", os.devnull, os.devnull]
    return subprocess.run(probe, capture_output=True).returncode == 0


# GCC's -fdirectives-only evaluates the directives (so the same headers open) without expanding
# macros in the text: the same graph in less than half the time.
FAST = ["-fdirectives-only"] if accepts("-fdirectives-only") else []


def include_tree(path, flags):
    """Chains [path, first include, ..., header] for every header the compiler opens."""
    cmd = [cxx, "-std=c++17", "-E", "-H", "-w", *FAST, "-o", os.devnull, "-I", "include", *flags,
           "-x", "c++", path]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    chains, stack, errors = [], [path], []
    for line in proc.stderr.splitlines():
        m = re.match(r"^(\.+) (.*)$", line)
        if not m:
            if line.startswith("Multiple include guards"):
                break
            errors.append(line)
            continue
        depth = len(m.group(1))
        del stack[depth:]
        stack.append(rel(os.path.join(root, m.group(2))))
        chains.append(list(stack))
    if proc.returncode != 0:
        return None, "\n".join(errors) or "exit status %d" % proc.returncode
    return chains, None


def check(path):
    """The violations of one file, one message each, in line order."""
    own_name, own = layer_of(path)
    cuda_ok = path.startswith("src/cuda/")
    lines = include_lines(path)
    found = {}

    def where(first_hop):
        """The line of this file that includes first_hop (a path, or a name the text pass saw)."""
        for number, spelled, name, resolved in lines:
            if first_hop in (resolved, name) or first_hop.endswith("/" + name):
                return number, spelled
        return 0, "an include of " + first_hop

    def note(first_hop, kind, target, chain):
        number, spelled = where(first_hop)
        if (number, kind) in found:
            return
        if kind == "layer":
            name, _ = layer_of(target)
            what = "layer violation: %s (%s) includes %s (%s)" % (path, own_name, target, name)
        else:
            what = "CUDA header outside src/cuda: %s includes %s" % (path, target)
        via = " through " + " -> ".join(chain[1:]) if len(chain) > 2 else ""
        found[(number, kind)] = "%s:%d: %s: %s%s" % (path, number, what, spelled, via)

    if own > TOP:
        found[(0, "layer")] = "%s:0: not a layer of docs/architecture.md: %s" % (path, own_name)
    for _, _, name, resolved in lines:  # the text of the file, every branch
        if not cuda_ok and os.path.basename(name) in CUDA_HEADERS:
            note(resolved or name, "cuda", resolved or name, [path, name])
        target = resolved and layer_of(resolved)
        if target and target[1] > own:
            note(resolved, "layer", resolved, [path, resolved])
    for flags in configs:  # the graph the compiler sees
        chains, error = include_tree(path, flags)
        if error is not None:
            found[(0, "compile" + flags[0])] = "%s:0: cannot preprocess (%s): %s" % (
                path, " ".join(flags), error)
            continue
        for chain in chains:
            target = layer_of(chain[-1])
            if target and target[1] > own:
                note(chain[1], "layer", chain[-1], chain)
            if (not cuda_ok and os.path.basename(chain[-1]) in CUDA_HEADERS
                    and all(in_repo(p) for p in chain[:-1])):
                note(chain[1], "cuda", chain[-1], chain)
    return [found[k] for k in sorted(found)]


with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    results = list(pool.map(check, files))
problems = [p for r in results for p in r]
for p in problems:
    print(p)
if not files:
    print("check-layers: no sources under %s/include/gpumem or %s/src" % (root, root))
    sys.exit(1)
if problems:
    sys.exit(1)
print("layers: ok (%d files, %d configuration%s)" % (len(files), len(configs),
                                                   "s" if len(configs) > 1 else ""))
PY
