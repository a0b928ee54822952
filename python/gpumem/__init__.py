"""gpumem: GPU memory pools and memory managers, for Python.

    import gpumem
    gpumem.set_memory_manager("pool", device=0)      # before the device is first used
    buf = gpumem.allocate(1 << 20, stream=0)          # freed when `buf` dies
    print(gpumem.statistics(0).bytes_in_use)
    with gpumem.defer_cleanup():                      # nothing is freed in here
        ...

Bridges (each imports its framework only when imported itself): ``gpumem.numba`` (an EMM plugin:
``NUMBA_CUDA_MEMORY_MANAGER=gpumem.numba``), ``gpumem.cupy`` (``cupy.cuda.set_allocator``) and
``gpumem.torch`` (``gpumem.torch.use()``). ``python -m gpumem.plot LOG.csv -o timeline.png`` draws
an allocation log. This module imports no framework. docs/python.md has the details.

Thread safety: every function may be called from any thread. Replacing a device's manager or
closing its context (``set_memory_manager``, ``close``) must not overlap allocations on that device
made without the GIL (PyTorch's, through ``gpumem.torch``). Devices: ``device=None`` means the
calling thread's current device (gpumem's, which follows cudaSetDevice).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Optional

from . import _gpumem
from ._errors import (
    CudaError,
    GpumemError,
    InvalidArgumentError,
    NotSupportedError,
    OutOfMemoryError,
)
from ._gpumem import Allocation, HostAllocation

__all__ = [
    "Allocation", "HostAllocation", "MemoryStatistics", "CudaError", "GpumemError",
    "InvalidArgumentError", "NotSupportedError", "OutOfMemoryError", "allocate", "close",
    "close_for_device_reset",
    "current_device", "defer_cleanup", "device_count", "flush", "get_ipc_handle", "manager_name",
    "memalloc", "memhostalloc", "memory_info", "release_stream", "replay_log", "reset",
    "reset_memory_managers", "set_memory_manager", "statistics",
]

__version__ = "0.1.0"


@dataclasses.dataclass(frozen=True)
class MemoryStatistics:
    """One snapshot of a device's memory manager (gpumem::memory_statistics).

    ``bytes_in_use``: handed out, not yet freed (queued frees count); ``peak_bytes``: its highest;
    ``held_bytes``: taken from the device (a pool's chunks; equal to ``bytes_in_use`` for managers
    without a cache); ``allocations``: live ones; ``total_allocations``: all that succeeded;
    ``out_of_memory_retries``: allocations that succeeded only after a flush and retry;
    ``pending_count``/``pending_bytes``: the deferred-deallocation queue now;
    ``retired_count``/``retired_bytes``: frees out of that queue waiting for the one device
    synchronisation that releases them (pool and async managers; still in ``bytes_in_use``).
    """

    device: int
    manager: str
    bytes_in_use: int
    peak_bytes: int
    held_bytes: int
    allocations: int
    total_allocations: int
    out_of_memory_retries: int
    pending_count: int
    pending_bytes: int
    retired_count: int
    retired_bytes: int


def device_count() -> int:
    """Devices of gpumem's backend (GPUMEM_DEVICE=host simulates them on host threads)."""
    return _gpumem.device_count()


def current_device() -> int:
    return _gpumem.current_device()


def set_memory_manager(name: str, device: Optional[int] = None, *, log: str = "",
                       initial_size: int = 0, chunk_size: int = 32 << 20,
                       maximum_size: Optional[int] = None, max_cached_size: int = 256 << 10,
                       expandable: bool = False, trim_before_growth: bool = True,
                       wait_across_streams: bool = False) -> None:
    """Chooses the memory manager of ``device`` (every device when None).

    ``name``: ``default`` (cudaMalloc, deferred frees), ``host_only`` (frees at once), ``pool``
    (gpumem's pool; the keyword options are its pool_options), ``async`` (cudaMallocAsync), or the
    path of a C++ plugin library. ``log``: a CSV allocation log written by the pool or async
    manager (``python -m gpumem.plot`` draws it). Closes the device's existing gpumem context, so
    the next allocation binds the new manager; memory already handed out stays valid and goes back
    to the manager that made it. Raises InvalidArgumentError for an unknown name or options.
    """
    _gpumem.set_memory_manager(name, device, log, initial_size, chunk_size, maximum_size,
                               max_cached_size, expandable, trim_before_growth,
                               wait_across_streams)


def reset_memory_managers() -> None:
    """Back to GPUMEM_MEMORY_MANAGER's choice for every device (closes every context)."""
    _gpumem.reset_memory_managers()


def manager_name(device: Optional[int] = None) -> str:
    return _gpumem.manager_name(device)


def memalloc(nbytes: int, device: Optional[int] = None) -> Allocation:
    """Device memory with the EMM's synchronous semantics: usable by any stream on return."""
    return _gpumem.memalloc(nbytes, device)


def allocate(nbytes: int, stream: int = 0, device: Optional[int] = None) -> Allocation:
    """Device memory for work on ``stream`` (a cudaStream_t as an int; 0 the default stream),
    freed on that stream when the Allocation dies. The stream must stay alive until then;
    call release_stream() before destroying a stream that the pool has seen."""
    return _gpumem.allocate(nbytes, stream, device)


def memhostalloc(nbytes: int, mapped: bool = False, portable: bool = False,
                 write_combined: bool = False, device: Optional[int] = None) -> HostAllocation:
    """Pinned host memory (mapped into the device's address space when ``mapped``)."""
    return _gpumem.memhostalloc(nbytes, mapped, portable, write_combined, device)


def release_stream(stream: int, device: Optional[int] = None) -> None:
    """Tells the device's manager that ``stream`` is about to be destroyed (the pool gives back
    what it keeps for it). Call it after the allocations made on the stream are freed."""
    _gpumem.release_stream(stream, device)


def get_ipc_handle(allocation: Allocation) -> tuple:
    """(64-byte CUDA IPC handle of the allocation's base, exported size, offset in the base)."""
    return _gpumem.get_ipc_handle(allocation)


def statistics(device: Optional[int] = None) -> MemoryStatistics:
    return MemoryStatistics(**_gpumem.statistics(device))


def memory_info(device: Optional[int] = None) -> tuple:
    """(free, total) bytes as the manager sees them; NotSupportedError where it cannot tell."""
    return _gpumem.memory_info(device)


@contextlib.contextmanager
def defer_cleanup(device: Optional[int] = None) -> Iterator[None]:
    """Nothing queued for deallocation is freed while inside (guards nest; an exception ends the
    deferral too). Leaving the outermost flushes the queue if it is over its limits. What is
    queued: every free of the default manager; see docs/python.md for the others."""
    guard = _gpumem.defer_cleanup(device)
    try:
        yield
    finally:
        guard.release()


def flush(device: Optional[int] = None) -> int:
    """Runs the device's deferred frees now (unless deferred); returns how many ran."""
    return _gpumem.flush(device)


def reset(device: Optional[int] = None) -> None:
    """The manager's reset(): flushes pending frees and trims caches; live memory stays."""
    _gpumem.reset(device)


def close(device: Optional[int] = None) -> None:
    """Destroys gpumem's context of ``device`` (all when None), flushing its queues; the next use
    makes a new one. Live memory stays valid and is freed by its owner."""
    _gpumem.close(device)


def close_for_device_reset(device: int) -> None:
    """close(device) before the device's CUDA context is reset under gpumem (Numba's
    cuda.close()): everything releasable goes now; memory still live is left to the reset (its
    later frees make no CUDA call) and, if no reset follows, stays valid but is never reused."""
    _gpumem.close_for_device_reset(device)


def replay_log(path: str, target: str = "pool", *, honour_streams: bool = True,
               **pool_options: int) -> dict:
    """Replays a CSV allocation log against a fresh ``pool`` (with pool options) or ``cuda``
    (plain device allocations). Returns the replay's counts, ``peak_live_bytes``,
    ``peak_held_bytes``, ``fragmentation`` and ``held`` (the pool's held bytes after each
    replayed allocation and free)."""
    return _gpumem.replay_log(path, target, honour_streams=honour_streams, **pool_options)
