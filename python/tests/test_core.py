"""gpumem's own API on the host backend: allocation, statistics, deferral, errors, managers."""

import gc
import subprocess
import sys

import pytest

import gpumem


def test_import_gpumem_imports_no_framework():
    code = ("import sys, gpumem, gpumem._gpumem; "
            "print(sorted(m for m in ('numba', 'cupy', 'torch', 'numpy', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_libgpumem_beside_the_extension_found_without_ld_library_path():
    import os

    code = ("import gpumem, os; gpumem.allocate(1); "
            "print([l.split()[-1] for l in open('/proc/self/maps') if 'libgpumem' in l][0])")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    loaded = out.stdout.strip()
    assert os.path.dirname(loaded) == os.path.dirname(gpumem._gpumem.__file__)


def test_allocate_and_free_change_statistics():
    gpumem.set_memory_manager("pool", 0)
    before = gpumem.statistics(0)
    assert before.manager == "pool"
    assert before.bytes_in_use == 0
    a = gpumem.allocate(4096, stream=0, device=0)
    b = gpumem.memalloc(1 << 20, device=0)
    assert a.ptr != 0 and b.ptr != 0 and a.ptr != b.ptr
    assert a.size == 4096 and a.device == 0
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 4096 + (1 << 20)
    assert s.allocations == 2
    assert s.held_bytes >= s.bytes_in_use
    del a
    b.free()
    assert b.ptr == 0
    b.free()  # idempotent
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 1 << 20, "memalloc's free waits in the deferred queue (EMM)"
    assert s.pending_count == 1
    gpumem.flush(0)
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 0
    assert s.allocations == 0
    assert s.total_allocations == 2
    assert s.peak_bytes == 4096 + (1 << 20)


def test_zero_bytes_is_a_null_allocation():
    a = gpumem.allocate(0)
    assert a.ptr == 0 and a.size == 0
    assert gpumem.statistics().total_allocations == 0


def test_default_manager_defers_frees_and_defer_cleanup_holds_them():
    gpumem.set_memory_manager("default", 0)
    with gpumem.defer_cleanup(0):
        allocations = [gpumem.memalloc(1024, 0) for _ in range(20)]
        del allocations
        gc.collect()
        s = gpumem.statistics(0)
        assert s.pending_count == 20, "inside defer_cleanup nothing is freed, over the limit too"
        assert s.bytes_in_use == 20 * 1024
    s = gpumem.statistics(0)
    assert s.pending_count == 0, "leaving the guard flushes a queue over its limit"
    assert s.bytes_in_use == 0


def test_defer_cleanup_ends_when_an_exception_leaves_it():
    gpumem.set_memory_manager("default", 0)
    with pytest.raises(KeyError):
        with gpumem.defer_cleanup(0):
            raise KeyError("x")
    for _ in range(11):
        gpumem.memalloc(1024, 0)
    assert gpumem.statistics(0).pending_count == 0, "the 11th free flushes: no deferral left"


def test_flush_runs_the_queue():
    gpumem.set_memory_manager("default", 0)
    for _ in range(3):
        gpumem.memalloc(256, 0)
    assert gpumem.statistics(0).pending_count == 3
    assert gpumem.flush(0) == 3
    assert gpumem.statistics(0).pending_count == 0


def test_out_of_memory_is_a_memory_error_with_the_requested_bytes():
    gpumem.set_memory_manager("pool", 0, maximum_size=8 << 20)
    with pytest.raises(gpumem.OutOfMemoryError) as info:
        gpumem.allocate(64 << 20, device=0)
    error = info.value
    assert isinstance(error, MemoryError)
    assert error.requested_bytes == 64 << 20
    assert "64" in str(error) or str(64 << 20) in str(error)


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError):
        gpumem.set_memory_manager("no_such_manager")
    with pytest.raises(ValueError):
        gpumem.set_memory_manager("default", log="/tmp/never.csv")  # logs need pool or async
    with pytest.raises(ValueError):
        gpumem.allocate(16, device=gpumem.device_count())


def test_not_supported_is_not_implemented_error():
    gpumem.set_memory_manager("async", 0)
    a = gpumem.memalloc(4096, 0)
    with pytest.raises(NotImplementedError):
        gpumem.get_ipc_handle(a)


def test_pool_options_reach_the_pool():
    # Each keyword is a pool_options field: a pool that waits across streams, on two streams.
    gpumem.set_memory_manager("pool", 0, wait_across_streams=True, trim_before_growth=False,
                              expandable=False, max_cached_size=1 << 20)
    assert gpumem.manager_name(0) == "pool"
    blocks = [gpumem.memalloc(size, 0) for size in (4096, 2 << 20, 6 << 20)]
    assert [b.size for b in blocks] == [4096, 2 << 20, 6 << 20]
    del blocks
    with pytest.raises(TypeError):
        gpumem.set_memory_manager("pool", 0, wait_across_stream=True)
    gpumem.reset_memory_managers()


def test_set_memory_manager_per_device_closes_and_rebinds():
    gpumem.set_memory_manager("host_only", 0)
    assert gpumem.manager_name(0) == "host_only"
    live = gpumem.memalloc(4096, 0)
    gpumem.set_memory_manager("pool", 0)
    assert gpumem.manager_name(0) == "pool"
    assert live.size == 4096, "memory outlives its manager's context"
    del live
    gpumem.reset_memory_managers()
    assert gpumem.manager_name(0) == "default"


def test_release_stream_and_close():
    gpumem.set_memory_manager("pool", 0)
    a = gpumem.allocate(4096, stream=0, device=0)
    del a
    gpumem.release_stream(0, 0)
    gpumem.close(0)
    assert gpumem.statistics(0).total_allocations == 0, "a new context after close(0)"


def test_pinned_host_memory():
    h = gpumem.memhostalloc(8192)
    assert h.ptr != 0 and h.size == 8192 and not h.mapped
    m = gpumem.memhostalloc(4096, mapped=True)
    assert m.mapped and m.device_ptr != 0
    with pytest.raises(ValueError):
        _ = h.device_ptr  # not mapped
    m.free()
    assert m.ptr == 0 and m.device_ptr == 0  # freed: 0, not "not mapped"


def test_a_manager_name_with_a_nul_byte_is_refused():
    with pytest.raises(ValueError, match="NUL byte at offset 1"):
        gpumem.set_memory_manager("a\0b")


def test_close_for_device_reset_then_late_frees_are_silent():
    # Numba's cuda.close() order on the host backend: memory still owned by live objects after
    # close_for_device_reset(0) (the plugin's reset) is dropped later without an error and with at
    # most one log line; the next use makes a new context.
    import subprocess
    import sys

    code = """
import gpumem
gpumem.set_memory_manager("pool", 0)
kept = [gpumem.memalloc(80, 0), gpumem.memalloc(8 << 20, 0), gpumem.allocate(4096, 0, 0)]
queued = gpumem.memalloc(1 << 20, 0)
del queued
gpumem.close_for_device_reset(0)
fresh = gpumem.memalloc(80, 0)
assert gpumem.statistics(0).total_allocations == 1, gpumem.statistics(0)
del kept
print("ok")
"""
    import os

    env = dict(os.environ, GPUMEM_DEVICE="host", GPUMEM_LOG_LEVEL="info")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) <= 1, out.stderr


@pytest.mark.parametrize("manager", ["pool", "default", "async"])
def test_the_legacy_default_stream_handle_is_a_stream(manager, capfd):
    # cudaStreamLegacy (1) names the legacy default stream, as the null handle does. The host
    # backend took it for a destroyed stream: the async manager's free failed (logged), and the
    # block stayed in the statistics for ever.
    from gpumem import _gpumem

    gpumem.set_memory_manager(manager, 0)
    a = gpumem.allocate(4096, stream=1, device=0)
    assert a.ptr != 0
    del a
    _gpumem._stream_hold(1)()  # work queued on it runs
    gpumem.flush(0)
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 0 and s.allocations == 0, s
    gpumem.release_stream(1, 0)
    assert "gpumem [error]" not in capfd.readouterr().err
