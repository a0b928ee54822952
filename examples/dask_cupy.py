"""A CuPy workload on a LocalCUDACluster with gpumem on every worker (issue 16's example).

    python examples/dask_cupy.py                        # gpumem's pool under CuPy on each worker
    python examples/dask_cupy.py --allocator default    # Dask's defaults: CuPy's own memory pool
    python examples/dask_cupy.py --compare              # both, one after the other; checks results
    python examples/dask_cupy.py --size-gb 200 --workload transpose --log-dir /tmp/gpumem-logs

The workload is a random N x N float64 matrix made on the GPUs by dask.array with CuPy chunks
(seeded: both allocators see the same numbers), and either
  * reduction: the variance of all its elements, two passes over the data (the mean first), so the
    chunks of the first pass are kept or made again: with --size-gb above the GPUs' memory Dask
    spills them (dask-cuda's device_memory_limit);
  * transpose: the sum of squares of (X + X.T): every chunk (i, j) meets chunk (j, i), which lives
    on another worker for most pairs, so the workers exchange the whole matrix (a shuffle).
It prints the result, the time of each round of the computation (the first also compiles
CuPy's kernels and grows the pools) and each worker's memory: with gpumem, its
statistics (peak bytes in use, bytes the pool holds, allocations made through gpumem); with the
default allocator, what CuPy's pool holds at the end (its high-water mark, unless it gave blocks
back to retry an allocation). --log-dir also writes each worker's allocation log and one timeline
picture of all workers (gpumem only).

Needs a CUDA machine with dask-cuda and CuPy: pip install 'gpumem[dask]' cupy-cuda12x (or the
cupy wheel of your CUDA). docs/dask.md explains the options.
"""

from __future__ import annotations

import argparse
import math
import sys
import time


def make_matrix(size_gb: float, chunk_mb: float, seed: int):
    import cupy
    import dask.array as da

    n = int(math.sqrt(size_gb * 1e9 / 8))
    c = max(1, min(n, int(math.sqrt(chunk_mb * 1e6 / 8))))
    state = da.random.RandomState(seed, RandomState=cupy.random.RandomState)
    return state.random_sample((n, n), chunks=(c, c))


def workload(name: str, x):
    if name == "reduction":
        return ((x - x.mean()) ** 2).mean()
    return ((x + x.T) ** 2).sum()


def memory_report(client, allocator: str) -> dict:
    if allocator == "gpumem":
        import gpumem.dask

        return gpumem.dask.memory_statistics(client)

    def cupy_pool():
        import cupy

        pool = cupy.get_default_memory_pool()
        return {"held_bytes": pool.total_bytes(), "used_bytes": pool.used_bytes()}

    return client.run(cupy_pool)


def gib(n) -> str:
    return f"{n / 2**30:.2f} GiB"


def run(args, allocator: str) -> float:
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    cluster_options = dict(n_workers=args.workers, threads_per_worker=1, dashboard_address=None)
    if args.devices:
        cluster_options["CUDA_VISIBLE_DEVICES"] = args.devices
    if args.device_memory_limit:
        cluster_options["device_memory_limit"] = args.device_memory_limit
    with LocalCUDACluster(**cluster_options) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers)
        if allocator == "gpumem":
            import gpumem.dask

            gpumem.dask.setup(client, pool_size=args.pool_size,
                              maximum_pool_size=args.maximum_pool_size, frameworks=["cupy"],
                              log_directory=args.log_dir)
        x = make_matrix(args.size_gb, args.chunk_mb, args.seed)
        print(f"[{allocator}] {args.workload} of a {x.shape[0]} x {x.shape[1]} float64 matrix "
              f"({x.nbytes / 1e9:.1f} GB, chunks {x.chunksize}) on {args.workers} workers")
        # The first round also compiles CuPy's kernels (cached on disk for later processes) and
        # grows the pools: --rounds 2 (the default) shows the warm time beside it.
        for round_ in range(args.rounds):
            start = time.perf_counter()
            result = float(workload(args.workload, x).compute())
            seconds = time.perf_counter() - start
            print(f"[{allocator}] result {result!r} in {seconds:.2f} s (round {round_ + 1})")
        for address, m in sorted(memory_report(client, allocator).items()):
            if allocator == "gpumem":
                visible = m["cuda_visible_devices"]
                print(f"[{allocator}]   {address} (CUDA_VISIBLE_DEVICES={visible}): "
                      f"peak in use {gib(m['peak_bytes'])}, held {gib(m['held_bytes'])}, "
                      f"{m['total_allocations']} allocations through gpumem")
            else:
                print(f"[{allocator}]   {address}: CuPy's pool holds {gib(m['held_bytes'])} "
                      f"({gib(m['used_bytes'])} in use)")
        if allocator == "gpumem" and args.log_dir:
            picture = gpumem.dask.memory_timeline(client, f"{args.log_dir}/workers.png",
                                                  title=f"{args.workload} on {args.workers} "
                                                        "workers")
            print(f"[{allocator}] timeline of every worker: {picture}")
        return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--allocator", choices=("gpumem", "default"), default="gpumem")
    parser.add_argument("--compare", action="store_true",
                        help="run with gpumem, then with the default allocator; check the results")
    parser.add_argument("--workload", choices=("reduction", "transpose"), default="reduction")
    parser.add_argument("--workers", type=int, default=2, help="one per GPU (default 2)")
    parser.add_argument("--devices", default=None, help="CUDA_VISIBLE_DEVICES, e.g. 0,1")
    parser.add_argument("--size-gb", type=float, default=16.0, help="the matrix's size")
    parser.add_argument("--chunk-mb", type=float, default=256.0, help="one chunk's size")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rounds", type=int, default=2, help="computations timed in turn")
    parser.add_argument("--pool-size", default="0.5", help="gpumem's initial pool: bytes, "
                        "'20GB', '512MiB' or a fraction of the device such as 0.5 (gpumem.dask "
                        "parses it)")
    parser.add_argument("--maximum-pool-size", default="0.9", help="gpumem's pool limit")
    parser.add_argument("--device-memory-limit", default=None,
                        help="dask-cuda's spill threshold per worker (default: dask-cuda's)")
    parser.add_argument("--log-dir", default=None, help="write gpumem's allocation logs here and "
                        "draw all workers in LOG_DIR/workers.png")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    if args.compare:
        with_gpumem = run(args, "gpumem")
        with_default = run(args, "default")
        same = math.isclose(with_gpumem, with_default, rel_tol=1e-12, abs_tol=0.0)
        print(f"results {'equal' if same else 'DIFFER'}: gpumem {with_gpumem!r}, "
              f"default {with_default!r}")
        return 0 if same else 1
    run(args, args.allocator)
    return 0


if __name__ == "__main__":
    sys.exit(main())
