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
