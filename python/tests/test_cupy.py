"""gpumem.cupy on a GPU (skipped without a GPU or CuPy): arrays on several streams, frees while
kernels run, stream release, out of memory, pinned memory."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.cupy]


@pytest.fixture
def cp():
    import os

    os.environ["GPUMEM_DEVICE"] = "cuda"
    import cupy

    import gpumem
    import gpumem.cupy

    gpumem.set_memory_manager("pool", 0)
    gpumem.cupy.use(pinned=True)
    yield cupy
    cupy.cuda.set_allocator(None)
    cupy.cuda.set_pinned_memory_allocator(None)


def test_arrays_on_several_streams(cp):
    import gpumem
    import gpumem.cupy

    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    results = []
    for i, s in enumerate(streams):
        with s:
            a = cp.arange(1 << 20, dtype=cp.float32) * i
            b = a + 1  # a is freed on s while the kernel may still run
            del a
            results.append(b)
    for s in streams:
        s.synchronize()
    for i, r in enumerate(results):
        assert float(r[10]) == 10 * i + 1
    assert gpumem.statistics(0).bytes_in_use >= 4 * (4 << 20)
    del results, r, b  # b: the last stream's result, still bound
    for s in streams:
        gpumem.cupy.release_stream(s)
    del streams
    assert gpumem.statistics(0).bytes_in_use == 0


def test_out_of_memory_is_cupys(cp):
    with pytest.raises(cp.cuda.memory.OutOfMemoryError):
        cp.empty(1 << 50, dtype=cp.uint8)


def test_pinned_memory(cp):
    x = cp.cuda.alloc_pinned_memory(1 << 16)
    assert x.ptr != 0


def test_malloc_makes_cupys_own_pointer_objects(cp):
    """Made through tp_new and __init__'s stores (_cupy_fast_path) or by calling the types: the
    objects are CuPy's, with the fields CuPy reads, and the block goes back when they die."""
    import gpumem
    import gpumem.cupy
    from gpumem import _gpumem

    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        before = gpumem.statistics(0).bytes_in_use
        mp = gpumem.cupy.malloc(12345)
        assert type(mp) is cp.cuda.memory.MemoryPointer and type(mp.mem) is cp.cuda.memory.UnownedMemory
        assert mp.ptr == mp.mem.ptr != 0 and mp.mem.size == 12345
        assert mp.device_id == mp.mem.device_id == 0
        owner = mp.mem._owner
        assert type(owner) is _gpumem.BlockAllocation and owner.ptr == mp.ptr
        assert owner.stream == stream.ptr and owner.size == 12345
        assert gpumem.statistics(0).bytes_in_use == before + 12345
        view = mp + 64  # CuPy's own arithmetic on the pointer
        assert view.ptr == mp.ptr + 64 and view.mem is mp.mem
        del mp, view, owner
        assert gpumem.statistics(0).bytes_in_use == before
        a = cp.ndarray((1000,), dtype=cp.float64)  # through cupy.cuda.alloc
        a.fill(2.0)
        assert float(a.sum()) == 2000.0
    stream.synchronize()
    print("gpumem.cupy fast path:", _gpumem._cupy_fast_path())
    gpumem.cupy.release_stream(stream)


def test_a_stream_dropped_before_its_arrays_lives_until_their_frees(cp):
    """Each block holds CuPy's stream object: released and dropped by the program while its
    arrays live, the stream is destroyed only after their frees (which wait for it)."""
    import gc
    import weakref

    import gpumem
    import gpumem.cupy

    before = gpumem.statistics(0).bytes_in_use
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        arrays = [cp.full((1 << 18,), float(i), dtype=cp.float32) for i in range(4)]
        total = arrays[0] + arrays[3]  # a kernel still running when the stream is dropped
    gpumem.cupy.release_stream(stream)
    alive = weakref.ref(stream)
    del stream
    gc.collect()
    assert alive() is not None, "the arrays' blocks keep the stream"
    assert float(total[0]) == 3.0
    del arrays, total
    gc.collect()
    assert alive() is None, "gone with the last block"
    assert gpumem.statistics(0).bytes_in_use == before


def test_streams_the_program_drops_are_released_and_destroyed(cp):
    """The bridge keeps a stream until the pool lets it go; one the program dropped, with no array
    left, is released to the pool and destroyed when the registry grows: creating and dropping
    many streams keeps the registry small and frees everything."""
    import gc
    import weakref

    import gpumem
    import gpumem.cupy
    from gpumem import _gpumem

    before = gpumem.statistics(0).bytes_in_use
    alive = []
    sizes = []
    for i in range(300):
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            a = cp.full((1 << 10,), float(i), dtype=cp.float32)
            b = a * 2  # a is freed on the stream while the kernel may still run
            del a
            assert float(b[-1]) == 2.0 * i
            del b
        alive.append(weakref.ref(stream))
        del stream
        sizes.append(len(_gpumem._cupy_known_streams()))
    assert max(sizes) <= 16, max(sizes)
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 16, "the others were destroyed"
    assert gpumem.statistics(0).bytes_in_use == before
    gpumem.cupy.empty_cache()
    gc.collect()
    assert all(ref() is None for ref in alive) and _gpumem._cupy_known_streams() == []
