"""The C parts of the framework bridges on the host backend, without the frameworks' devices:
PyTorch's two C functions (called through ctypes, as CUDAPluggableAllocator does) and
gpumem.numba's pointer made by the extension (gpumem.cupy's allocator: test_cupy_host.py)."""

import ctypes
import subprocess
import sys

import pytest

import gpumem
from gpumem import _gpumem


@pytest.fixture
def torch_abi():
    lib = ctypes.CDLL(_gpumem.__file__)
    lib.gpumem_torch_alloc.restype = ctypes.c_void_p
    lib.gpumem_torch_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.gpumem_torch_free.restype = None
    lib.gpumem_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                      ctypes.c_void_p]
    lib.gpumem_torch_live_allocations.restype = ctypes.c_size_t
    return lib


def test_torch_functions_on_the_pool_count_and_free_without_a_table(torch_abi):
    gpumem.set_memory_manager("pool", 0)
    base = torch_abi.gpumem_torch_live_allocations()
    assert torch_abi.gpumem_torch_alloc(0, 0, None) is None
    ptrs = [torch_abi.gpumem_torch_alloc(4096 * (i + 1), 0, None) for i in range(5)]
    assert all(ptrs) and len(set(ptrs)) == 5
    assert torch_abi.gpumem_torch_live_allocations() == base + 5
    s = gpumem.statistics(0)
    assert s.allocations == 5 and s.bytes_in_use == 4096 * 15
    for i, p in enumerate(ptrs):
        torch_abi.gpumem_torch_free(p, 4096 * (i + 1), 0, None)
    assert torch_abi.gpumem_torch_live_allocations() == base
    s = gpumem.statistics(0)
    assert s.allocations == 0 and s.bytes_in_use == 0 and s.pending_count == 0
    assert _gpumem._time_torch_pair(100, 4096, 0, 0) > 0
    assert _gpumem._time_device_synchronize(10, 0) > 0  # bench/python_alloc.py's split


def test_torch_blocks_of_a_replaced_manager_go_back_to_it(torch_abi):
    # The device's manager changes while PyTorch holds blocks of the old one: each free must go
    # to the manager its block came from (recorded from the switch on), pool or table alike.
    gpumem.set_memory_manager("pool", 0)
    base = torch_abi.gpumem_torch_live_allocations()
    old = [torch_abi.gpumem_torch_alloc(8192, 0, None) for _ in range(3)]
    gpumem.set_memory_manager("pool", 0)  # a new context and pool; the old pool lives on
    new = [torch_abi.gpumem_torch_alloc(4096, 0, None) for _ in range(2)]
    assert gpumem.statistics(0).bytes_in_use == 8192
    torch_abi.gpumem_torch_free(old[0], 8192, 0, None)
    torch_abi.gpumem_torch_free(new[0], 4096, 0, None)
    assert gpumem.statistics(0).bytes_in_use == 4096, "the old block went to the old pool"
    gpumem.set_memory_manager("default", 0)  # no unowned path: the table
    table = torch_abi.gpumem_torch_alloc(1024, 0, None)
    assert gpumem.statistics(0).allocations == 1
    torch_abi.gpumem_torch_free(old[1], 8192, 0, None)
    torch_abi.gpumem_torch_free(new[1], 4096, 0, None)
    torch_abi.gpumem_torch_free(table, 1024, 0, None)
    gpumem.flush(0)
    assert gpumem.statistics(0).bytes_in_use == 0
    gpumem.set_memory_manager("pool", 0)
    again = torch_abi.gpumem_torch_alloc(4096, 0, None)
    torch_abi.gpumem_torch_free(again, 4096, 0, None)
    torch_abi.gpumem_torch_free(old[2], 8192, 0, None)
    assert gpumem.statistics(0).bytes_in_use == 0
    assert torch_abi.gpumem_torch_live_allocations() == base


def test_torch_a_table_block_freed_after_a_switch_to_the_pool_goes_to_the_table():
    # A fresh process: the device must not be recording already (another test's switch would
    # have turned it on). "default" has no unowned path, so its blocks are in the table; after the
    # switch to a pool their frees must still find them there, not go to the pool.
    code = """
import ctypes, gpumem
from gpumem import _gpumem
lib = ctypes.CDLL(_gpumem.__file__)
lib.gpumem_torch_alloc.restype = ctypes.c_void_p
lib.gpumem_torch_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.gpumem_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.gpumem_torch_live_allocations.restype = ctypes.c_size_t
gpumem.set_memory_manager("default", 0)
table = lib.gpumem_torch_alloc(4096, 0, None)
gpumem.set_memory_manager("pool", 0)
pooled = lib.gpumem_torch_alloc(4096, 0, None)
lib.gpumem_torch_free(table, 4096, 0, None)
lib.gpumem_torch_free(pooled, 4096, 0, None)
print(lib.gpumem_torch_live_allocations(), gpumem.statistics(0).bytes_in_use)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "0"], out.stdout + out.stderr
    assert "not a live block" not in out.stderr, out.stderr


def test_torch_alloc_refuses_a_stream_being_captured(torch_abi):
    # CUDA graph capture is not supported by gpumem.torch: an allocation on a captured stream is a
    # clear error, raised before the pool sees it (which could call cudaMalloc during the capture,
    # or hand out a block that a replay of the graph would write into). The host backend has no
    # graphs: the test marks a stream as captured (simulate_stream_capture).
    if _gpumem.backend_kind() != "host":
        pytest.skip("marks a stream as captured, which only the host backend simulates; on a GPU, "
                    "test_torch.py's test_cuda_graph_capture_is_a_clear_error captures for real")
    gpumem.set_memory_manager("pool", 0)
    stream = _gpumem._stream_create()
    try:
        assert not _gpumem._stream_is_capturing(stream)
        p = torch_abi.gpumem_torch_alloc(4096, 0, stream)
        torch_abi.gpumem_torch_free(p, 4096, 0, stream)
        before = gpumem.statistics(0)
        _gpumem._simulate_stream_capture(stream, True)
        assert _gpumem._stream_is_capturing(stream)
        # Through _torch_alloc, which raises the C++ error (ctypes cannot catch an exception;
        # PyTorch reports it as a RuntimeError with the same text).
        with pytest.raises(gpumem.NotSupportedError) as caught:
            _gpumem._torch_alloc(4096, 0, stream)
        message = str(caught.value)
        assert f"stream {stream:#x} of device 0" in message, message
        assert "captured into a CUDA graph" in message and "gpumem.torch" in message, message
        after = gpumem.statistics(0)
        assert after.total_allocations == before.total_allocations, "refused before the pool"
        assert after.bytes_in_use == 0
        # Other streams allocate as before. The legacy default stream (0) is not even asked: CUDA
        # never captures it, so PyTorch's default stream pays nothing for the check.
        _gpumem._simulate_stream_capture(0, True)
        for other in (0, 2):
            q = _gpumem._torch_alloc(4096, 0, other)
            assert q != 0
            torch_abi.gpumem_torch_free(q, 4096, 0, other)
        _gpumem._simulate_stream_capture(0, False)
        _gpumem._simulate_stream_capture(stream, False)  # the capture ended
        p = _gpumem._torch_alloc(4096, 0, stream)
        torch_abi.gpumem_torch_free(p, 4096, 0, stream)
    finally:
        _gpumem._simulate_stream_capture(0, False)
        _gpumem._simulate_stream_capture(stream, False)
        gpumem.release_stream(stream, 0)
        _gpumem._stream_destroy(stream)
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 0 and s.total_allocations == before.total_allocations + 3


def test_torch_table_blocks_are_counted_per_device(torch_abi):
    # Blocks of a manager without an unowned path ("default") are kept in a table, and a free on a
    # device with table blocks looks there first (the slow path). The count is per device: one
    # device's table blocks leave every other device's frees on the fast path.
    gpumem.set_memory_manager("default", 0)
    others = (1, 7, 63, 64, -1)  # 64 and -1: past the bridge's slots (one shared count)
    base = {d: _gpumem._torch_table_blocks(d) for d in (0,) + others}
    p = torch_abi.gpumem_torch_alloc(4096, 0, None)
    q = torch_abi.gpumem_torch_alloc(512, 0, None)
    assert _gpumem._torch_table_blocks(0) == base[0] + 2
    assert all(_gpumem._torch_table_blocks(d) == base[d] for d in others)
    torch_abi.gpumem_torch_free(p, 4096, 0, None)
    assert _gpumem._torch_table_blocks(0) == base[0] + 1
    gpumem.set_memory_manager("pool", 0)  # the table block is still found after the switch
    r = torch_abi.gpumem_torch_alloc(1024, 0, None)
    torch_abi.gpumem_torch_free(q, 512, 0, None)
    torch_abi.gpumem_torch_free(r, 1024, 0, None)
    assert _gpumem._torch_table_blocks(0) == base[0]
    assert gpumem.statistics(0).bytes_in_use == 0


def test_torch_functions_on_the_default_manager_use_the_table(torch_abi):
    gpumem.set_memory_manager("default", 0)
    p = torch_abi.gpumem_torch_alloc(4096, 0, None)
    assert gpumem.statistics(0).allocations == 1
    torch_abi.gpumem_torch_free(p, 4096, 0, None)
    gpumem.flush(0)
    assert gpumem.statistics(0).allocations == 0


class _Context:
    pass


class _Pointer:
    """Stands in for gpumem.numba._GpumemPointer where numba is not installed."""

    is_managed = False
    refct = 1
    _owner = None

    @property
    def _cuda_memsize_(self):
        return self.size


def _pointer_class():
    try:
        import gpumem.numba

        return gpumem.numba._GpumemPointer
    except ImportError:
        return _Pointer


def test_numba_pointer_is_made_in_c_and_frees_through_the_queue():
    gpumem.set_memory_manager("pool", 0)
    cls = _pointer_class()
    ctx = _Context()
    memalloc = _gpumem._numba_memalloc(cls, ctx, 0, None)
    size = 4096 + 1  # an int of its own, not one of CPython's shared small ones
    p = memalloc(size)
    assert type(p) is cls
    assert p.context is ctx and p.size == size and p._cuda_memsize_ == size
    assert p.size is size, "the caller's int is the pointer's size (no int made per call)"
    assert p.refct == 1 and p.is_managed is False and p._owner is None
    assert type(p._allocation) is _gpumem.BlockAllocation
    assert p._allocation.size == size and p._allocation.ptr != 0 and p._allocation.device == 0
    if cls is not _Pointer:
        assert p.owner is p
        assert int(p.device_pointer) == p._allocation.ptr and p.handle is p.device_pointer
        p.free()  # no finalizer: nothing happens, as Numba's MemoryPointer without one
    assert gpumem.statistics(0).bytes_in_use == size
    del p
    s = gpumem.statistics(0)
    assert s.pending_count == 1 and s.bytes_in_use == size, "EMM frees are deferred"
    gpumem.flush(0)
    assert gpumem.statistics(0).bytes_in_use == 0
    with pytest.raises(gpumem.OutOfMemoryError) as info:
        memalloc(1 << 62)
    assert info.value.requested_bytes == 1 << 62
    asked = []
    answer = _gpumem._numba_memalloc(cls, ctx, 0, lambda n: asked.append(n) or "answer")
    assert answer(1 << 62) == "answer"
    assert asked == [1 << 62], "out of memory: the callback answers"
    with pytest.raises(ValueError, match="-5"):
        memalloc(-5)
    with pytest.raises(ValueError, match="'4096'"):
        memalloc("4096")
    with pytest.raises(ValueError):
        _gpumem._numba_memalloc(42, ctx, 0, None)
    with pytest.raises(TypeError):
        _gpumem.BlockAllocation()


def test_numba_pointer_of_a_manager_without_unowned_blocks_owns_a_memory_pointer():
    gpumem.set_memory_manager("default", 0)
    memalloc = _gpumem._numba_memalloc(_pointer_class(), _Context(), 0, None)
    p = memalloc(8192)
    assert p._allocation.size == 8192 and p._allocation.ptr != 0
    assert memalloc(0)._allocation.ptr == 0, "0 bytes: nothing to own"
    del p
    assert gpumem.statistics(0).pending_count == 1, "the default manager defers its frees too"
    gpumem.flush(0)
    assert gpumem.statistics(0).bytes_in_use == 0


def test_numba_frees_past_the_limit_are_retired_until_one_synchronisation():
    # The pool's queue: the 11th free retires the batch (the pending count drops, as Numba's), the
    # memory stays in use until one device synchronisation releases every retired batch.
    gpumem.set_memory_manager("pool", 0)
    memalloc = _gpumem._numba_memalloc(_pointer_class(), _Context(), 0, None)
    for _ in range(11):
        memalloc(1024)
    s = gpumem.statistics(0)
    assert (s.pending_count, s.retired_count, s.retired_bytes) == (0, 11, 11 * 1024)
    assert s.bytes_in_use == 11 * 1024, "retired frees are not back in the pool yet"
    # 14 batches of 11 stay retired; the 15th passes the limit (16 x 10 items) and releases all.
    for _ in range(13 * 11):
        memalloc(1024)
    s = gpumem.statistics(0)
    assert (s.pending_count, s.retired_count) == (0, 14 * 11)
    for _ in range(11):
        memalloc(1024)
    s = gpumem.statistics(0)
    assert (s.pending_count, s.retired_count, s.bytes_in_use) == (0, 0, 0)
    for _ in range(3):
        memalloc(1024)
    assert gpumem.flush(0) == 3
    assert gpumem.statistics(0).bytes_in_use == 0


def test_numba_memalloc_in_c_pairs_with_the_cpp_timing():
    gpumem.set_memory_manager("pool", 0)
    assert _gpumem._time_numba_pair(100, 4096, 0) > 0  # bench/python_alloc.py's split
    gpumem.flush(0)
    assert gpumem.statistics(0).bytes_in_use == 0


def test_numba_manager_memalloc_makes_the_pointer_in_c_and_reports_numbas_errors():
    numba_bridge = pytest.importorskip("gpumem.numba")
    gpumem.set_memory_manager("pool", 0)

    class Device:
        id = 0

    class Context:
        device = Device()

    ctx = Context()
    manager = numba_bridge.GpumemNumbaManager(context=ctx)
    first = manager.memalloc(4096)  # initializes first
    # From then on Numba's self.memory_manager.memalloc(n) finds the extension's function.
    assert type(manager.memalloc).__name__ == "builtin_function_or_method"
    second = manager.memalloc(1024)
    assert type(first) is type(second) is numba_bridge._GpumemPointer
    assert first.context == ctx and second.size == 1024
    assert gpumem.statistics(0).bytes_in_use == 5120
    with pytest.raises(numba_bridge.OutOfMemoryError) as caught:
        manager.memalloc(1 << 62)
    assert isinstance(caught.value, MemoryError) and caught.value.requested_bytes == 1 << 62
    del first, second
    gpumem.flush(0)
    assert gpumem.statistics(0).bytes_in_use == 0
    manager.reset()  # as cuda.close(): the next memalloc initializes again
    assert manager._device is None
    assert manager.memalloc.__self__ is manager, "the method again, until initialize()"
    again = manager.memalloc(256)
    assert again.size == 256 and manager._device == 0
    assert type(manager.memalloc).__name__ == "builtin_function_or_method"


def test_torch_functions_from_many_threads_keep_every_count(torch_abi):
    # ctypes releases the GIL around each call, so the threads really run the C functions at once
    # (PyTorch frees from autograd and DataLoader threads).
    import threading

    gpumem.set_memory_manager("pool", 0)
    base = torch_abi.gpumem_torch_live_allocations()
    errors = []

    def work(seed):
        try:
            held = []
            for i in range(2000):
                size = 256 * (1 + (seed * 7 + i) % 13)
                held.append((torch_abi.gpumem_torch_alloc(size, 0, None), size))
                if len(held) > 8:
                    p, n = held.pop((seed + i) % len(held))
                    torch_abi.gpumem_torch_free(p, n, 0, None)
            for p, n in held:
                torch_abi.gpumem_torch_free(p, n, 0, None)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert torch_abi.gpumem_torch_live_allocations() == base
    s = gpumem.statistics(0)
    assert s.allocations == 0 and s.bytes_in_use == 0 and s.total_allocations == 8000
