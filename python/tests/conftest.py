"""pytest setup for gpumem's package tests.

Tests run on gpumem's host backend (GPUMEM_DEVICE=host, a simulated device on host threads) unless
GPUMEM_DEVICE is set already; framework tests carry the marks gpu/numba/cupy/torch and skip, saying
why, when the framework or a CUDA device is missing. Every test starts from the environment's
memory manager with no gpumem context alive.
"""

import importlib.util
import os
import shutil
import subprocess

import pytest

os.environ.setdefault("GPUMEM_DEVICE", "host")


def _has_cuda_device() -> bool:
    if os.environ.get("GPUMEM_DEVICE") == "host" and os.environ.get("GPUMEM_TEST_GPU") != "1":
        return False
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except Exception:
        return False


HAS_GPU = _has_cuda_device()


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(pytest.mark.skip(
                reason="needs a CUDA device (none found, or GPUMEM_DEVICE=host without "
                       "GPUMEM_TEST_GPU=1)"))
        for framework in ("numba", "cupy", "torch"):
            if framework in item.keywords and not have(framework):
                item.add_marker(pytest.mark.skip(reason=f"{framework} is not installed"))


@pytest.fixture(autouse=True)
def fresh_gpumem():
    import gpumem

    gpumem.reset_memory_managers()
    yield
    gpumem.reset_memory_managers()
