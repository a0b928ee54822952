"""gpumem.dask on a distributed.LocalCluster: 2 worker processes on 127.0.0.1 (one thread each, no
dashboards), on the backend of the test run (host in CI: GPUMEM_DEVICE=host, inherited by the
workers). The plugin, a small workload through gpumem's own allocations, statistics from both
workers, bad configurations, re-running setup, the combined timeline, IPC between two workers and
a worker restart. Skips where dask or distributed is not installed (the GPU machine has no package
registry). The 2-GPU tests (mark gpu) skip with a reason on fewer than 2 devices.
"""

import ctypes
import os
import subprocess
import sys

import pytest

pytest.importorskip("distributed", reason="distributed (dask) is not installed: pip install "
                    "'gpumem[dask]'")

import distributed  # noqa: E402

import gpumem  # noqa: E402
import gpumem.dask  # noqa: E402
import gpumem.ipc  # noqa: E402

from conftest import HAS_GPU, have  # noqa: E402

MiB = 1 << 20


@pytest.fixture(scope="module")
def client():
    if os.environ.get("GPUMEM_DEVICE", "host") != "host" and not have("cupy"):
        pytest.skip("on the cuda backend the workers fill and check device memory with CuPy, "
                    "which is not installed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       memory_limit=0, silence_logs=40)
    c = distributed.Client(cluster)
    c.wait_for_workers(2, timeout=60)
    yield c
    c.close()
    cluster.close()


def addresses(client):
    return sorted(client.scheduler_info()["workers"])


# --- helpers that run on the workers ---------------------------------------------------------

def _write(ptr, data):
    if gpumem._gpumem.backend_kind() == "host":
        ctypes.memmove(ptr, data, len(data))
    else:
        import cupy
        import numpy

        host = numpy.frombuffer(bytearray(data), dtype=numpy.uint8)
        cupy.cuda.runtime.memcpy(ptr, host.ctypes.data, len(data), 1)  # host to device


def _read(ptr, n):
    if gpumem._gpumem.backend_kind() == "host":
        return ctypes.string_at(ptr, n)
    import cupy
    import numpy

    host = numpy.empty(n, dtype=numpy.uint8)
    cupy.cuda.runtime.memcpy(host.ctypes.data, ptr, n, 2)  # device to host
    return host.tobytes()


def _workload(seed):
    """Allocates through gpumem's Python API, fills and checks every block, frees."""
    sizes = [(seed * 7919 + k * 104729) % (3 * MiB) + 1 for k in range(16)]
    blocks = []
    for k, n in enumerate(sizes):
        a = gpumem.allocate(n, device=0) if k % 2 else gpumem.memalloc(n, device=0)
        pattern = bytes([(seed + k) % 251]) * n
        _write(a.ptr, pattern)
        blocks.append((a, pattern))
    ok = all(_read(a.ptr, len(p)) == p for a, p in blocks)
    total = sum(sizes)
    del blocks
    gpumem.flush(0)  # memalloc's frees are deferred (the EMM rule)
    return ok, total


_kept = {}  # exporter side of the IPC test: the allocation stays alive while the opener uses it


def _ipc_export(n):
    a = gpumem.allocate(n, device=0)
    _write(a.ptr, bytes(range(256)) * (n // 256))
    _kept["ipc"] = a
    return gpumem.ipc.export(a), os.getpid()


def _ipc_open_and_write(handle, n, device):
    b = gpumem.ipc.open(handle, device=device)
    seen = _read(b.ptr, n)
    _write(b.ptr, b"\x5a" * n)  # the exporter must see this: same memory, no copy
    b.free()
    return seen, os.getpid()


def _ipc_exporter_reads(n):
    a = _kept.pop("ipc")
    return _read(a.ptr, n)


# --- tests ------------------------------------------------------------------------------------

def test_import_gpumem_imports_no_dask():
    code = ("import sys, gpumem; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("value,expected", [
    ("20GB", 20 * 10**9), ("512MiB", 512 * MiB), ("1.5GB", 1_500_000_000), (" 64 KiB ", 65536),
    (4096, 4096), ("4096", 4096), (0, 0), (0.25, 1 << 30), ("0.5", 2 << 30), (1.0, 4 << 30),
])
def test_parse_size(value, expected):
    assert gpumem.dask.parse_size(value, "pool_size", device_bytes=4 << 30) == expected


@pytest.mark.parametrize("value", ["20 G", "20gigs", "-5MB", "1e9", "0.5B", "", "GB", 1.5, 0.0,
                                   -0.1, float("nan"), float("inf"), -1, True, None, [1]])
def test_parse_size_refuses(value):
    with pytest.raises(ValueError) as error:
        gpumem.dask.parse_size(value, "maximum_pool_size", device_bytes=4 << 30)
    message = str(error.value)
    assert "maximum_pool_size" in message and repr(value) in message


def test_plugin_runs_a_workload_on_both_workers(client, tmp_path):
    gpumem.dask.setup(client, pool_size="64MiB", maximum_pool_size=0.5, chunk_size="8MiB",
                      log_directory=str(tmp_path))
    workers = addresses(client)
    assert len(workers) == 2
    futures = [client.submit(_workload, seed, workers=[workers[seed % 2]], pure=False)
               for seed in range(6)]
    results = client.gather(futures)
    assert all(ok for ok, _ in results)
    stats = gpumem.dask.memory_statistics(client)
    assert sorted(stats) == workers
    backend = os.environ.get("GPUMEM_DEVICE", "host")
    for address, s in stats.items():
        assert s["configured"] and s["manager"] == "pool" and s["backend"] == backend
        assert s["pool"]["initial_size"] == 64 * MiB
        assert s["pool"]["maximum_size"] == s["device_bytes"] // 2
        assert s["total_allocations"] >= 3 * 16  # three tasks of 16 allocations each
        assert s["peak_bytes"] > 0 and s["bytes_in_use"] == 0 and s["allocations"] == 0
        assert s["held_bytes"] >= 64 * MiB
        assert s["log"].startswith(str(tmp_path))
        assert "not available" in s["spilling"]


def test_setup_again_changes_nothing_and_other_options_reconfigure(client, tmp_path):
    gpumem.dask.setup(client, pool_size="32MiB")
    client.gather([client.submit(_workload, seed, workers=[w], pure=False)
                   for seed, w in enumerate(addresses(client))])
    before = gpumem.dask.memory_statistics(client)
    gpumem.dask.setup(client, pool_size="32MiB")  # the same: the same manager, nothing reset
    same = gpumem.dask.memory_statistics(client)
    for w in before:
        assert same[w]["pid"] == before[w]["pid"]
        assert same[w]["total_allocations"] == before[w]["total_allocations"] > 0
    gpumem.dask.setup(client, pool_size="16MiB", chunk_size="4MiB")  # another: a new manager
    after = gpumem.dask.memory_statistics(client)
    for w in before:
        assert after[w]["pid"] == before[w]["pid"]
        assert after[w]["pool"]["initial_size"] == 16 * MiB
        assert after[w]["pool"]["chunk_size"] == 4 * MiB
        assert after[w]["total_allocations"] == 0
    assert all(ok for ok, _ in client.gather(
        [client.submit(_workload, 9, workers=[w], pure=False) for w in addresses(client)]))


def test_bad_configuration_fails_naming_the_value(client):
    with pytest.raises(ValueError, match=r"pool_size='20 GiBs'"):
        gpumem.dask.setup(client, pool_size="20 GiBs")  # refused on the client
    with pytest.raises(ValueError, match=r"frameworks: 'jax'"):
        gpumem.dask.setup(client, frameworks=["jax"])
    with pytest.raises(ValueError, match=r"chunk_size.*manager='default'"):
        gpumem.dask.setup(client, "default", chunk_size="1MiB")
    # Refused on the workers, where the device decides: more than the device has.
    with pytest.raises(ValueError, match=r"pool_size=1000000000000000 bytes is more than the "
                                         r"device's"):
        gpumem.dask.setup(client, pool_size="1PB".replace("PB", "000TB"))
    with pytest.raises(ValueError, match=r"maximum_pool_size=\d+ bytes is less than pool_size"):
        gpumem.dask.setup(client, pool_size=0.5, maximum_pool_size=0.25)
    # A failed setup is unregistered: no later worker runs it.
    assert "gpumem" not in client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.worker_plugins))


def test_backend_and_framework_errors(client):
    if os.environ.get("GPUMEM_DEVICE", "host") == "host":
        with pytest.raises(gpumem.dask.NoDeviceError, match="cuda backend was asked for"):
            gpumem.dask.setup(client, backend="cuda")
    missing = next((f for f in ("torch", "cupy", "numba") if not have(f)), None)
    if missing is None:
        pytest.skip("numba, cupy and torch are all installed: no missing framework to ask for")
    with pytest.raises(ImportError, match=f"frameworks includes '{missing}'"):
        gpumem.dask.setup(client, frameworks=[missing])


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: the no-GPU error cannot happen")
def test_no_gpu_with_the_cuda_backend_is_a_clear_error():
    code = ("import gpumem.dask\n"
            "try:\n"
            "    gpumem.dask.GpumemPlugin().setup(None)\n"
            "except gpumem.dask.NoDeviceError as e:\n"
            "    print(e)\n"
            "else:\n"
            "    raise SystemExit('no error')\n")
    env = dict(os.environ, GPUMEM_DEVICE="cuda", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "no CUDA device can be used" in out.stdout and "CUDA_VISIBLE_DEVICES=''" in out.stdout


def test_combined_timeline_has_a_line_per_worker(client, tmp_path):
    gpumem.dask.setup(client, pool_size="16MiB", log_directory=str(tmp_path / "logs"))
    client.gather([client.submit(_workload, seed, workers=[w], pure=False)
                   for seed, w in enumerate(addresses(client))])
    logs = client.run(gpumem.dask._worker_log)
    assert sorted(logs) == addresses(client)
    for path, text in logs.values():
        assert text.startswith("Thread,Time,Action,Pointer,Size,Stream\n")
        assert text.count(",allocate,") >= 16 and text.count(",free,") >= 16
    output = gpumem.dask.memory_timeline(client, str(tmp_path / "workers.png"))
    with open(output, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _ipc_between_workers(client, open_device):
    exporter, opener = addresses(client)
    n = 64 * 1024
    gpumem.dask.setup(client, pool_size="16MiB")
    handle, exporter_pid = client.run(_ipc_export, n, workers=[exporter])[exporter]
    seen, opener_pid = client.run(_ipc_open_and_write, handle, n, open_device,
                                  workers=[opener])[opener]
    assert opener_pid != exporter_pid
    assert seen == bytes(range(256)) * (n // 256)
    assert client.run(_ipc_exporter_reads, n, workers=[exporter])[exporter] == b"\x5a" * n


def test_ipc_between_two_worker_processes(client):
    _ipc_between_workers(client, 0)


@pytest.mark.gpu
@pytest.mark.cupy
def test_ipc_between_two_worker_processes_on_two_gpus(client):
    if gpumem.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {gpumem.device_count()}")
    _ipc_between_workers(client, 1)  # exported on GPU 0, opened on GPU 1 (peer access)


@pytest.mark.gpu
def test_several_gpus_in_one_process():
    if gpumem.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {gpumem.device_count()}")
    gpumem.set_memory_manager("pool", 0, initial_size=8 * MiB)
    gpumem.set_memory_manager("pool", 1, initial_size=16 * MiB)
    a = gpumem.allocate(3 * MiB, device=0)
    b = gpumem.allocate(5 * MiB, device=1)
    s0, s1 = gpumem.statistics(0), gpumem.statistics(1)
    assert (s0.bytes_in_use, s1.bytes_in_use) == (3 * MiB, 5 * MiB)
    assert s0.held_bytes >= 8 * MiB and s1.held_bytes >= 16 * MiB
    del b  # freed while device 0 is current: it goes back to device 1's pool
    assert gpumem.statistics(1).bytes_in_use == 0
    assert gpumem.statistics(0).bytes_in_use == 3 * MiB
    del a


def test_a_restarted_worker_is_set_up_again(client):
    gpumem.dask.setup(client, pool_size="8MiB")
    before = gpumem.dask.memory_statistics(client)
    client.restart(timeout=60)
    client.wait_for_workers(2, timeout=60)
    after = gpumem.dask.memory_statistics(client)
    assert len(after) == 2
    assert {s["pid"] for s in after.values()}.isdisjoint({s["pid"] for s in before.values()})
    for s in after.values():
        assert s["configured"] and s["manager"] == "pool"
        assert s["pool"]["initial_size"] == 8 * MiB
