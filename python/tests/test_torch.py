"""gpumem.torch on a GPU (skipped without a GPU or PyTorch). Each test runs in a fresh process:
PyTorch's allocator can be replaced only before its first CUDA allocation."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.torch]


def run(code: str) -> str:
    env = dict(os.environ, GPUMEM_DEVICE="cuda")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


PRELUDE = """
import torch, gpumem, gpumem.torch
gpumem.set_memory_manager('pool', 0)
gpumem.torch.use()
"""


def test_tensors_on_several_streams_and_frees_while_kernels_run():
    out = run(PRELUDE + """
streams = [torch.cuda.Stream() for _ in range(4)]
keep = []
for i, s in enumerate(streams):
    with torch.cuda.stream(s):
        a = torch.full((1 << 20,), float(i), device='cuda')
        b = (a @ a.new_ones(1 << 20).unsqueeze(1)).squeeze()
        del a
        keep.append(b)
torch.cuda.synchronize()
print([round(float(k)) for k in keep] == [i * (1 << 20) for i in range(4)])
print(gpumem.torch.memory_stats()['allocated_bytes'] > 0)
del keep, b
torch.cuda.synchronize()
# PyTorch keeps a cuBLAS workspace per (handle, stream) from its allocator: gpumem, here.
if hasattr(torch._C, '_cuda_clearCublasWorkspaces'):
    torch._C._cuda_clearCublasWorkspaces()
print(gpumem.torch.live_allocations() == 0, gpumem.statistics(0).bytes_in_use == 0)
""")
    assert out.split() == ["True", "True", "True", "True"]


def test_use_after_pytorch_allocated_is_a_clear_error():
    out = run("""
import torch, gpumem.torch
x = torch.empty(10, device='cuda')
try:
    gpumem.torch.use()
except RuntimeError as e:
    print('before the first CUDA tensor' in str(e))
""")
    assert out.strip() == "True"


def test_out_of_memory_raises():
    out = run(PRELUDE + """
try:
    torch.empty(1 << 50, dtype=torch.uint8, device='cuda')
except RuntimeError as e:
    print('out of memory' in str(e).lower() or 'cannot allocate' in str(e).lower())
""")
    assert out.strip() == "True"


def test_cuda_graph_capture_is_a_clear_error():
    # gpumem.torch does not support graph capture: an allocation on the capturing stream raises,
    # naming the stream, before the pool sees it, so the capture ends cleanly and PyTorch goes on.
    out = run(PRELUDE + """
import warnings
x = torch.ones(1 << 10, device='cuda')
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # PyTorch warns that the graph it ended is empty
        with torch.cuda.graph(g):
            y = x * 2
    print('captured')
except RuntimeError as e:
    m = str(e)
    print('captured into a CUDA graph' in m, 'gpumem.torch' in m, 'stream 0x' in m)
z = x + 1
print(float(z.sum()) == 2 * (1 << 10))
""")
    assert out.split() == ["True", "True", "True", "True"], out


def test_training_loop_with_varying_shapes():
    out = run(PRELUDE + """
import random
random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(50):
    batch, seq = random.randint(1, 64), random.randint(1, 32)
    x = torch.randn(batch, seq, 64, device='cuda')
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
torch.cuda.synchronize()
print(bool(torch.isfinite(loss)), gpumem.statistics(0).peak_bytes > 0)
""")
    assert out.split() == ["True", "True"]
