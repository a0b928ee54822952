"""gpumem.ipc: memory exported by this process, opened and written by another (host backend: the
simulated device's shared-memory file; tests/cuda/ipc_test.cpp covers the C++ side on both)."""

import ctypes
import os
import subprocess
import sys

import pytest

import gpumem
import gpumem.ipc

pytestmark = pytest.mark.skipif(os.environ.get("GPUMEM_DEVICE", "host") != "host",
                                reason="reads and writes the memory with ctypes: host backend only")

CHILD = """
import ctypes, sys, gpumem, gpumem.ipc
handle = bytes.fromhex(sys.argv[1])
view = gpumem.ipc.open(handle, device=0)
sys.stdout.write(ctypes.string_at(view.ptr, view.size).hex())
ctypes.memset(view.ptr, 0x5A, view.size)
view.free()
"""


def test_another_process_sees_and_writes_the_same_memory():
    a = gpumem.allocate(4096 + 100, device=0)
    ctypes.memmove(a.ptr, bytes(range(256)) * 16, 4096)
    handle = gpumem.ipc.export(a)
    out = subprocess.run([sys.executable, "-c", CHILD, handle.hex()], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert bytes.fromhex(out.stdout)[:4096] == bytes(range(256)) * 16
    assert ctypes.string_at(a.ptr, a.size) == b"\x5a" * a.size  # the child's writes, no copy


def test_open_refuses_the_exporting_process_and_bad_bytes():
    a = gpumem.allocate(1024, device=0)
    with pytest.raises(gpumem.InvalidArgumentError, match="exported by this process"):
        gpumem.ipc.open(gpumem.ipc.export(a), device=0)
    with pytest.raises(gpumem.InvalidArgumentError):
        gpumem.ipc.open(b"not a handle", device=0)
