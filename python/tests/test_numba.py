"""gpumem.numba on a GPU: the EMM plugin through NUMBA_CUDA_MEMORY_MANAGER (skipped without a GPU
or numba-cuda). numba-cuda's own EMM tests run with the plugin in scripts/gpu-check.sh."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.numba]


def run(code: str, manager: str = "pool") -> str:
    env = dict(os.environ, NUMBA_CUDA_MEMORY_MANAGER="gpumem.numba", GPUMEM_DEVICE="cuda",
               GPUMEM_MEMORY_MANAGER=manager)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def numba_cannot_compile_kernels() -> str:
    """Why this machine's numba-cuda cannot compile kernels (with any memory manager), or ''.
    numba-cuda releases that register overloads of NumPy functions newer NumPy removed (such as
    np.row_stack) fail on the first kernel compilation, before any memory is involved."""
    probe = subprocess.run([sys.executable, "-c", "import numba.cuda.cudaimpl"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        return ""
    return "numba-cuda cannot compile kernels here: " + probe.stderr.strip().splitlines()[-1]


def test_arrays_kernels_and_statistics_through_the_plugin():
    reason = numba_cannot_compile_kernels()
    if reason:
        pytest.skip(reason)
    out = run("""
import numpy as np, gpumem
from numba import cuda
@cuda.jit
def inc(a):
    i = cuda.grid(1)
    if i < a.size: a[i] += 1
ctx = cuda.current_context()
assert type(ctx.memory_manager).__name__ == 'GpumemNumbaManager'
a = cuda.to_device(np.arange(1000, dtype=np.float32))
inc[4, 256](a)
assert (a.copy_to_host() == np.arange(1000) + 1).all()
print(gpumem.statistics(0).bytes_in_use >= 4000)
del a
with cuda.defer_cleanup():
    b = cuda.device_array(1 << 20)
    del b
print(gpumem.statistics(0).manager)
""")
    assert out.split() == ["True", "pool"]


def test_close_and_reinitialise():
    out = run("""
import numpy as np, gpumem
from numba import cuda
a = cuda.to_device(np.ones(10))
del a
cuda.close()
b = cuda.to_device(np.ones(10))
assert b.copy_to_host().sum() == 10
print('ok')
""")
    assert out.strip() == "ok"


def test_out_of_memory_is_cuda_api_error_and_memory_error():
    out = run("""
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError
try:
    cuda.device_array(1 << 50, dtype='u1')
except MemoryError as e:
    print(isinstance(e, CudaAPIError), e.requested_bytes == 1 << 50)
""")
    assert out.split() == ["True", "True"]


def test_out_of_memory_survives_a_pickle_round_trip():
    # Dask sends a worker's exceptions to the client pickled: the type and fields must survive.
    out = run("""
import pickle
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError
try:
    cuda.device_array(1 << 50, dtype='u1')
except MemoryError as e:
    back = pickle.loads(pickle.dumps(e))
    print(type(back) is type(e), isinstance(back, CudaAPIError), back.requested_bytes == 1 << 50,
          str(back) == str(e))
""")
    assert out.split() == ["True", "True", "True", "True"]


def test_memory_info_is_not_implemented_or_ordered():
    out = run("""
from numba import cuda
try:
    info = cuda.current_context().get_memory_info()
    print(info.free <= info.total)
except NotImplementedError:
    print(True)
""", manager="default")
    assert out.strip() == "True"
