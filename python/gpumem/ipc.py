"""Device memory shared between processes of one node (CUDA IPC), without a host copy.

    # exporting process (keeps `a` alive while others use the memory)
    a = gpumem.allocate(1 << 20, device=0)
    handle = gpumem.ipc.export(a)          # bytes: send them by any means (pickle, a socket, Dask)
    # another process on the same node
    b = gpumem.ipc.open(handle, device=0)  # an Allocation over the same device memory
    ...                                    # b.ptr addresses the exporter's bytes
    b.free()                               # or let it die: unmaps

``export`` serialises gpumem's ipc_handle (C++ ``memory_manager::get_ipc_handle``): the backend's
handle of the allocation's base, the offset and size of the exported range, the source device and
the exporting process. ``open`` maps it on ``device`` of the calling process and returns an
Allocation whose ``ptr`` is the exported range; dropping it unmaps (the exporter's memory is
untouched). The cuda backend uses CUDA's legacy IPC (pool and default managers; the async
manager's memory cannot be exported); the host backend maps the exporter's simulated device
memory through its shared-memory file, so the same code runs without a GPU.

Errors: opening in the exporting process, malformed bytes: gpumem.InvalidArgumentError; an
exporter that has exited or a handle of another backend: gpumem.CudaError. Ownership: the
exporter must keep its Allocation alive until every opener has dropped its mapping (CUDA's rule).
Thread safety: any thread.
"""

from __future__ import annotations

from typing import Optional

from . import Allocation, _device, _exportable, _gpumem

__all__ = ["export", "open"]


def export(allocation: Allocation) -> bytes:
    """The IPC handle of ``allocation``'s memory as bytes (for ``open`` in another process)."""
    return _gpumem.ipc_export(_exportable("gpumem.ipc.export", allocation))


def open(handle: bytes, device: Optional[int] = None) -> Allocation:  # noqa: A001 (module API)
    """Maps the memory named by ``handle`` (from ``export`` in another process) on ``device``
    (None: the calling thread's current device) and returns an Allocation that owns the mapping."""
    # bytes(n) of an int would make n zero bytes (a terabyte for a large one), bytes(s) of a str
    # fail with a message that names neither: only bytes-like handles are taken.
    if not isinstance(handle, (bytes, bytearray, memoryview)):
        raise TypeError(f"gpumem.ipc.open needs the handle's bytes (from gpumem.ipc.export), not "
                        f"{type(handle).__name__} ({handle!r:.80})")
    return _gpumem.ipc_open(bytes(handle), _device(device))
