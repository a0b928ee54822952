"""gpumem.cupy's allocator on the host backend, without CuPy or a device: the extension's malloc
with stand-ins for CuPy's types, and its registry of the streams it allocated on."""

import sys

import pytest

import gpumem
from gpumem import _gpumem


class _Unowned:
    def __init__(self, ptr, size, owner, device_id):
        self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id


class _MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset


@pytest.fixture
def cupy_fakes():
    state = {"stream": 0, "kept": [], "oom": [], "object": object()}

    def out_of_memory(nbytes):
        state["oom"].append(nbytes)
        raise MemoryError(nbytes)

    _gpumem._cupy_setup(None, lambda: state["stream"], _Unowned, _MemoryPointer,
                        lambda device, handle: state["kept"].append((device, handle))
                        or state["object"],
                        out_of_memory)
    yield state
    if "gpumem.cupy" in sys.modules:  # give the real module its bridge back
        cp = sys.modules["gpumem.cupy"]
        _gpumem._cupy_setup(cp._current_stream_capsule(),
                            lambda: cp._cupy.cuda.get_current_stream().ptr,
                            cp._memory.UnownedMemory, cp._memory.MemoryPointer, cp._keep_stream,
                            cp._malloc_after_out_of_memory)


def test_cupy_malloc_in_c_keeps_new_streams_once_and_reports_out_of_memory(cupy_fakes):
    gpumem.set_memory_manager("pool", 0)
    mp = _gpumem._cupy_malloc(4096)
    assert isinstance(mp, _MemoryPointer) and mp.mem.size == 4096 and mp.mem.device_id == 0
    assert mp.ptr != 0 and type(mp.mem.owner) is _gpumem.BlockAllocation
    assert mp.mem.owner.ptr == mp.ptr and mp.mem.owner.size == 4096 and mp.mem.owner.stream == 0
    assert not _gpumem._cupy_fast_path(), "Python stand-ins: CuPy's types are called"
    assert cupy_fakes["kept"] == [], "the null stream is never kept"
    assert gpumem.statistics(0).bytes_in_use == 4096
    del mp
    assert gpumem.statistics(0).bytes_in_use == 0, "stream-ordered: freed at once"
    # A stream other than 0, 1, 2 is told to the module once (it keeps CuPy's object); 0 bytes,
    # so that the made-up handle never reaches the pool.
    cupy_fakes["stream"] = 0x5000
    stream_object = cupy_fakes["object"]
    refs = sys.getrefcount(stream_object)
    a, b = _gpumem._cupy_malloc(0), _gpumem._cupy_malloc(0)
    assert a.ptr == 0 and b.mem.size == 0
    assert cupy_fakes["kept"] == [(0, 0x5000)], "told once per (device, stream)"
    assert sys.getrefcount(stream_object) == refs + 3, "the bridge's table and each block"
    _gpumem._cupy_forget_stream(0, 0x5000)
    assert sys.getrefcount(stream_object) == refs + 2, "the blocks keep the stream object"
    del a, b
    assert sys.getrefcount(stream_object) == refs, "released with the blocks"
    _gpumem._cupy_malloc(0)
    assert cupy_fakes["kept"] == [(0, 0x5000)] * 2, "forgotten: told again"
    _gpumem._cupy_forget_stream(0, 0x5000)
    cupy_fakes["stream"] = 0
    with pytest.raises(MemoryError):
        _gpumem._cupy_malloc(1 << 62)
    assert cupy_fakes["oom"] == [1 << 62]
    with pytest.raises(gpumem.OutOfMemoryError) as caught:  # the retry's own try
        _gpumem._cupy_malloc_no_retry(1 << 62)
    assert caught.value.requested_bytes == 1 << 62 and cupy_fakes["oom"] == [1 << 62]


class _HostStream:
    """Stands in for a CuPy stream: a stream of the backend, destroyed with the object (as CuPy's
    Stream.__del__ destroys its stream)."""

    destroyed = 0

    def __init__(self):
        self.ptr = _gpumem._stream_create()

    def synchronize(self):
        pass

    def __del__(self):
        _gpumem._stream_destroy(self.ptr)
        type(self).destroyed += 1


def test_cupy_a_dropped_stream_with_work_left_stays_until_it_is_idle(cupy_fakes):
    # A sweep releases only idle streams: a busy one stays registered (and alive) until a sweep
    # after its work has run.
    gpumem.set_memory_manager("pool", 0)
    _HostStream.destroyed = 0

    def use(stream):
        cupy_fakes["stream"], cupy_fakes["object"] = stream.ptr, stream

    busy = _HostStream()
    busy_handle = busy.ptr
    use(busy)
    _gpumem._cupy_malloc(4096)  # freed at once, on the stream
    open_hold = _gpumem._stream_hold(busy_handle)
    cupy_fakes["object"] = None
    del busy  # only the registry holds it now, and its work waits for the hold

    def sweep_by_new_streams(n):
        for _ in range(n):
            stream = _HostStream()
            use(stream)
            _gpumem._cupy_malloc(1024)
            cupy_fakes["object"] = None
            del stream

    try:
        sweep_by_new_streams(40)
        handles = [h for _, h, _ in _gpumem._cupy_known_streams()]
        assert busy_handle in handles, "a busy stream was released"
        assert _HostStream.destroyed == 40 - (len(handles) - 1), "idle ones were"
    finally:
        open_hold()
    _gpumem._time_device_synchronize(1, 0)  # the held work has run: the stream is idle
    sweep_by_new_streams(40)
    assert busy_handle not in [h for _, h, _ in _gpumem._cupy_known_streams()]
    entries = _gpumem._cupy_known_streams()
    for device, handle, obj in entries:
        _gpumem._cupy_forget_stream(device, handle)
        gpumem.release_stream(handle, device)
    del entries, obj
    assert _gpumem._cupy_known_streams() == [] and _HostStream.destroyed == 81
    cupy_fakes["stream"] = 0
    gpumem.reset(0)


def test_cupy_streams_the_program_dropped_leave_the_registry(cupy_fakes):
    # The bridge keeps every stream it allocated on until the pool has let it go; a stream the
    # program has dropped, with no block of it alive, is released to the pool and dropped when
    # the registry grows, so creating and dropping streams does not grow it without bound.
    gpumem.set_memory_manager("pool", 0)
    assert _gpumem._cupy_known_streams() == []
    _HostStream.destroyed = 0

    def use(stream):
        cupy_fakes["stream"], cupy_fakes["object"] = stream.ptr, stream

    kept = _HostStream()  # one stream the program keeps for the whole loop
    use(kept)
    held = _gpumem._cupy_malloc(4096)
    survivor = None  # an array that outlives its stream's object by a few streams
    sizes = []
    for i in range(1000):
        stream = _HostStream()
        use(stream)
        a = _gpumem._cupy_malloc(4096 + 256 * (i % 7))
        b = _gpumem._cupy_malloc(1024)
        del a  # freed on the stream: the pool keeps the block for that stream
        if i % 100 == 0:
            survivor = b
        del b
        use(kept)
        del stream
        sizes.append(len(_gpumem._cupy_known_streams()))
    assert max(sizes) <= 16, max(sizes)
    assert _HostStream.destroyed >= 1000 - 16, "dropped streams were released and destroyed"
    known = {(device, handle): obj for device, handle, obj in _gpumem._cupy_known_streams()}
    assert known[(0, kept.ptr)] is kept, "a stream the program holds stays"
    survivor_stream = survivor.mem.owner.stream
    assert (0, survivor_stream) in known, "so does one with a live block"
    del known
    assert gpumem.statistics(0).bytes_in_use == 4096 + 1024
    del held, survivor
    assert gpumem.statistics(0).bytes_in_use == 0
    entries = _gpumem._cupy_known_streams()
    for device, handle, obj in entries:  # as gpumem.cupy.empty_cache, which holds each object
        _gpumem._cupy_forget_stream(device, handle)
        gpumem.release_stream(handle, device)
    del entries, obj
    cupy_fakes["object"] = None
    del kept
    assert _gpumem._cupy_known_streams() == [] and _HostStream.destroyed == 1001
    gpumem.reset(0)  # nothing the pool keeps refers to a destroyed stream
    s = gpumem.statistics(0)
    assert s.bytes_in_use == 0 and s.total_allocations == 2001
    cupy_fakes["stream"] = 0
