#!/usr/bin/env python3
"""Allocation costs of gpumem's Python bridges against each framework's own allocator (GPU only).

    python bench/python_alloc.py                 # every case whose framework is installed
    python bench/python_alloc.py --reps 11 --iters 20000 --only numba,torch
    python bench/python_alloc.py --host --reps 21 --iters 50000   # no GPU: see below
    python bench/python_alloc.py --only train --max-cached-size 4194304   # a pool option

Each case runs in a fresh process (Numba's memory manager and PyTorch's allocator are chosen once
per process) and reports the median over --reps repetitions of the time per operation:

  numba  ctx.memalloc(4096)+drop and cuda.device_array(4096)+drop: Numba's default manager,
         gpumem.numba (pool), RMM's plugin (when rmm is installed)
  cupy   cupy.cuda.alloc(4096)+drop: CuPy's MemoryPool, gpumem.cupy.malloc (pool)
  torch  torch.empty(4096 B)+del: PyTorch's caching allocator, gpumem.torch (pool)
  train  a small model trained with batch and sequence length changing every step: median step
         time, peak reserved memory and peak allocated (live) memory, for PyTorch's allocator
         (expandable segments off and on) and gpumem's pool (chunks, and expandable)

For gpumem the cost is split (indented lines): numba, the manager's memalloc (the extension's
function that makes the pointer) + drop, its C++ part alone (memalloc_unowned + deferred free,
timed in C++), the same stream-ordered through a nanobind object (allocate+drop) and one device
synchronisation (the deferred queue makes one per release of its retired frees); cupy, the
extension's malloc, its allocate+drop and CuPy's pointer objects; torch, gpumem_torch_alloc+free
timed in C++ (the rest of torch.empty+del is PyTorch's).

--host measures the Numba bridge without a GPU, on gpumem's host backend (numba must be
importable; no CUDA is used): ctx.memalloc(4096)+drop through a stand-in for Numba's Context
(whose memalloc returns self.memory_manager.memalloc(n), as Numba's does) and the split above, in
thread CPU time, the minimum over --reps (for a shared machine). The host backend's device
synchronisation is cheap, so this shows the per-call path, not the deferred queue's waits.

--max-cached-size BYTES sets gpumem's pool_options::max_cached_size in every case (default: the
pool's own).

Frameworks that are missing are skipped with a line saying so; without a CUDA device nothing runs
(but --host). Record results in docs/benchmarks.md (date, device, command).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

NBYTES = 4096


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def per_op(fn, iters: int, reps: int, clock=time.perf_counter_ns, pick=statistics.median) -> float:
    """Nanoseconds per call of fn() over reps repetitions of iters calls (median by default)."""
    fn()  # warm
    samples = []
    for _ in range(reps):
        t0 = clock()
        for _ in range(iters):
            fn()
        samples.append((clock() - t0) / iters)
    return pick(samples)


# --- cases (each runs in its own process) ----------------------------------------------------

def case_numba(manager: str, iters: int, reps: int) -> dict:
    if manager == "gpumem":
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gpumem.numba"
        os.environ.setdefault("GPUMEM_MEMORY_MANAGER", "pool")
    elif manager == "rmm":
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "rmm.allocators.numba"
    from numba import cuda

    ctx = cuda.current_context()
    memalloc = per_op(lambda: ctx.memalloc(NBYTES), iters, reps)
    device_array = per_op(lambda: cuda.device_array(NBYTES, dtype="u1"), max(iters // 10, 100),
                          reps)
    result = {"memalloc+drop ns": memalloc, "device_array+drop ns": device_array}
    if manager == "gpumem":
        # The split: the manager's memalloc (the extension's function, which makes the whole
        # pointer) + drop; inside it, the C++ part alone (memalloc_unowned + the deferred free,
        # timed in C++: the rest is the two Python objects); the same stream-ordered through a
        # nanobind Allocation (allocate + drop: no queue); and one device synchronisation, which
        # the deferred queue makes once per release of its retired frees (up to 165 frees).
        from gpumem import _gpumem

        dev = ctx.device.id
        memalloc = ctx.memory_manager.memalloc  # after initialize(): the extension's function
        result["  of which the extension's memalloc+drop ns"] = per_op(
            lambda: memalloc(NBYTES), iters, reps)
        result["  of which C++ memalloc_unowned+deferred free ns"] = statistics.median(
            _gpumem._time_numba_pair(iters, NBYTES, dev) for _ in range(reps))
        result["  (stream-ordered) _gpumem.allocate+drop ns"] = per_op(
            lambda: _gpumem.allocate(NBYTES, 0, dev), iters, reps)
        result["  one release's device synchronisation ns"] = statistics.median(
            _gpumem._time_device_synchronize(iters // 10 or 1, dev) for _ in range(reps))
    cuda.synchronize()
    return result


# gpumem's pool options for every case (--max-cached-size).
POOL_OPTIONS: dict = {}


def case_cupy(allocator: str, iters: int, reps: int) -> dict:
    import cupy

    if allocator == "gpumem":
        import gpumem
        import gpumem.cupy

        gpumem.set_memory_manager("pool", cupy.cuda.runtime.getDevice(), **POOL_OPTIONS)
        gpumem.cupy.use()
    else:
        cupy.cuda.set_allocator(cupy.cuda.MemoryPool().malloc)
    ns = per_op(lambda: cupy.cuda.alloc(NBYTES), iters, reps)
    result = {"alloc+drop ns": ns}
    if allocator == "gpumem":
        # The split of gpumem.cupy.malloc (the extension's _cupy_malloc, no Python per call):
        # itself, the extension's stream-ordered allocate + drop, and the CuPy pointer objects it
        # makes (the rest is reading CuPy's stream and the device in C, and cupy.cuda.alloc).
        from cupy.cuda import memory, runtime

        from gpumem import _gpumem

        dev = runtime.getDevice()
        result["  of which _gpumem._cupy_malloc+drop ns"] = per_op(
            lambda: _gpumem._cupy_malloc(NBYTES), iters, reps)
        result["  of which _gpumem.allocate+drop ns"] = per_op(
            lambda: _gpumem.allocate(NBYTES, 0, dev), iters, reps)
        held = _gpumem.allocate(NBYTES, 0, dev)
        result["  of which MemoryPointer(UnownedMemory)+drop ns (calling the types)"] = per_op(
            lambda: memory.MemoryPointer(memory.UnownedMemory(held.ptr, NBYTES, held, dev), 0),
            iters, reps)
        # 1: malloc makes CuPy's two objects through tp_new and __init__'s stores (cheaper than
        # the calls above); 0: it calls the types (a CuPy whose objects did not pass the check).
        result["  fast path (CuPy's objects made in C)"] = float(_gpumem._cupy_fast_path())
    return result


def case_torch(allocator: str, iters: int, reps: int) -> dict:
    import torch

    if allocator == "gpumem":
        import gpumem
        import gpumem.torch

        gpumem.set_memory_manager("pool", 0, **POOL_OPTIONS)
        gpumem.torch.use()
    ns = per_op(lambda: torch.empty(NBYTES, dtype=torch.uint8, device="cuda"), iters, reps)
    result = {"empty+del ns": ns}
    if allocator == "gpumem":
        # The split: gpumem_torch_alloc + gpumem_torch_free timed in C++ (no Python), so the rest
        # of torch.empty+del is PyTorch's own path, its pluggable wrapper included.
        from gpumem import _gpumem

        result["  of which gpumem C alloc+free ns"] = statistics.median(
            _gpumem._time_torch_pair(iters, NBYTES, 0, 0) for _ in range(reps))
    return result


def case_train(allocator: str, steps: int, reps: int) -> dict:
    if allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import random

    import torch

    held = None
    if allocator.startswith("gpumem"):
        import gpumem
        import gpumem.torch

        gpumem.torch.use(pool_options={"expandable": allocator == "gpumem-expandable",
                                       **POOL_OPTIONS})
        held = lambda: gpumem.statistics(0).held_bytes  # noqa: E731
    random.seed(0)
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024,
                                         batch_first=True), num_layers=4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times, peak_held = [], 0
    for step in range(steps):
        batch, seq = random.randint(8, 64), random.randint(32, 512)
        x = torch.randn(batch, seq, 256, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if held is not None:
            peak_held = max(peak_held, held())
        del x, loss
    if held is not None:
        reserved, live = peak_held, gpumem.statistics(0).peak_bytes
    else:
        reserved, live = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
    # Live is what the loop itself needs at its peak (tensors allocated and not yet freed): no
    # allocator can reserve less, so reserved / live says how much of the goal is reachable.
    return {"step ms (median)": 1e3 * statistics.median(times[steps // 10:]),
            "peak reserved MiB": reserved / (1 << 20),
            "peak allocated (live) MiB": live / (1 << 20),
            "reserved/live": reserved / live if live else 0.0}


def numba_on_host(iters: int, reps: int) -> dict:
    """--host: gpumem.numba over the pool on the host backend, through a stand-in Context."""
    os.environ["GPUMEM_DEVICE"] = "host"
    import gpumem
    import gpumem.numba as plugin
    from gpumem import _gpumem

    class Device:
        id = 0

    class Context:  # numba.cuda.cudadrv.driver.Context.memalloc, as numba-cuda 0.30.4 has it
        device = Device()

        def memalloc(self, bytesize):
            return self.memory_manager.memalloc(bytesize)

    gpumem.set_memory_manager("pool", 0, **POOL_OPTIONS)
    ctx = Context()
    ctx.memory_manager = plugin.GpumemNumbaManager(context=ctx)
    ctx.memory_manager.initialize()

    def cpu(fn):
        return per_op(fn, iters, reps, clock=time.thread_time_ns, pick=min)

    result = {"ctx.memalloc+drop ns": cpu(lambda: ctx.memalloc(NBYTES))}
    memalloc = ctx.memory_manager.memalloc
    result["  of which the manager's memalloc+drop ns"] = cpu(lambda: memalloc(NBYTES))
    if hasattr(_gpumem, "_time_numba_pair"):  # older builds lack it
        def pair():
            t0 = time.thread_time_ns()
            _gpumem._time_numba_pair(iters, NBYTES, 0)
            return (time.thread_time_ns() - t0) / iters
        result["  of which C++ memalloc_unowned+deferred free ns"] = min(
            pair() for _ in range(reps))
    result["  (EMM, nanobind Allocation) _gpumem.memalloc+drop ns"] = cpu(
        lambda: _gpumem.memalloc(NBYTES, 0))
    result["  (stream-ordered) _gpumem.allocate+drop ns"] = cpu(
        lambda: _gpumem.allocate(NBYTES, 0, 0))
    result["  one device synchronisation ns"] = min(
        _gpumem._time_device_synchronize(iters // 10 or 1, 0) for _ in range(reps))
    return result


def print_result(case: str, variant: str, result: dict) -> None:
    main_cells = {k: v for k, v in result.items() if not k.startswith("  ")}
    cells = "  ".join(f"{k} {v:,.2f}" for k, v in main_cells.items())
    print(f"{case:6} {variant:17} {cells}")
    for k, v in result.items():  # the split of the cost, one line each
        if k.startswith("  "):
            print(f"{'':6} {'':17} {k.strip()} {v:,.1f}")


CASES = {
    "numba": (case_numba, ["default", "gpumem", "rmm"], {"rmm": "rmm"}),
    "cupy": (case_cupy, ["MemoryPool", "gpumem"], {}),
    "torch": (case_torch, ["pytorch", "gpumem"], {}),
    "train": (case_train, ["pytorch", "expandable", "gpumem", "gpumem-expandable"], {}),
}
FRAMEWORK = {"numba": "numba", "cupy": "cupy", "torch": "torch", "train": "torch"}


def run_child(case: str, variant: str, iters: int, reps: int) -> dict:
    fn = CASES[case][0]
    return fn(variant, iters, reps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=200, help="training steps")
    parser.add_argument("--only", default="", help="comma-separated: numba,cupy,torch,train")
    parser.add_argument("--host", action="store_true",
                        help="the Numba bridge on gpumem's host backend (no GPU)")
    parser.add_argument("--max-cached-size", type=int, default=None, metavar="BYTES",
                        help="gpumem's pool_options::max_cached_size (default: the pool's)")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.max_cached_size is not None:
        POOL_OPTIONS["max_cached_size"] = args.max_cached_size
    if args.host:
        python = sys.version.split()[0]
        print(f"# bench/python_alloc.py --host  reps={args.reps} iters={args.iters}  "
              f"(host backend, thread CPU time, minimum over reps; Python {python})")
        print_result("numba", "gpumem (host)", numba_on_host(args.iters, args.reps))
        return 0
    if args.child:
        case, variant = args.child
        iters = args.steps if case == "train" else args.iters
        print(json.dumps(run_child(case, variant, iters, args.reps)))
        return 0

    wanted = [c for c in CASES if not args.only or c in args.only.split(",")]
    options = "" if args.max_cached_size is None else f" max_cached_size={args.max_cached_size}"
    print(f"# bench/python_alloc.py  reps={args.reps} iters={args.iters} steps={args.steps}{options}")
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        device = gpu.stdout.strip() if gpu.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        device = ""
    if not device:
        print("skipped: no CUDA device (nvidia-smi found none)")
        return 0
    print(f"# device: {device}")
    env = dict(os.environ, GPUMEM_DEVICE="cuda")
    for case in wanted:
        framework = FRAMEWORK[case]
        if not have(framework):
            print(f"{case}: skipped ({framework} is not installed)")
            continue
        _fn, variants, needs = CASES[case]
        for variant in variants:
            if variant in needs and not have(needs[variant]):
                print(f"{case} / {variant}: skipped ({needs[variant]} is not installed)")
                continue
            out = subprocess.run([sys.executable, __file__, "--child", case, variant,
                                  "--reps", str(args.reps), "--iters", str(args.iters),
                                  "--steps", str(args.steps)] + (
                                     ["--max-cached-size", str(args.max_cached_size)]
                                     if args.max_cached_size is not None else []),
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{case} / {variant}: FAILED\n{out.stderr.strip()[-2000:]}")
                continue
            print_result(case, variant, json.loads(out.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
