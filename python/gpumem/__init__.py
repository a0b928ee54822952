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
import operator
import os
from typing import Any, Iterator, Optional

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


_SIZE_MAX = (1 << 64) - 1
_INT_MAX = (1 << 31) - 1


def _integer(what: str, value: Any) -> int:
    """``value`` as an int (any integral type: int, numpy's), else a TypeError naming it."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__} ({value!r})") from None


def _size(what: str, value: Any) -> int:
    """A byte count: an int from 0 to SIZE_MAX, else an error naming it."""
    n = _integer(what, value)
    if not 0 <= n <= _SIZE_MAX:
        raise InvalidArgumentError(f"{what} must be between 0 and {_SIZE_MAX} bytes, not {n}")
    return n


def _stream(value: Any) -> int:
    """A stream handle as an int (0: the default stream), else an error naming it."""
    n = _integer("stream", value)
    if not 0 <= n <= _SIZE_MAX:
        raise InvalidArgumentError(f"stream must be a handle from 0 to {_SIZE_MAX}, not {n}")
    return n


def _device(value: Any, *, none: bool = True) -> Optional[int]:
    """A device ordinal (None: the current device, where ``none``), else an error naming it.
    Ordinals past the backend's devices are left to the extension, which names them."""
    if value is None and none:
        return None
    n = _integer("device", value)
    if not -_INT_MAX - 1 <= n <= _INT_MAX:
        raise InvalidArgumentError(f"device {n} does not exist ({device_count()} device(s))")
    return n


def _existing_device(value: Any, *, none: bool = True) -> Optional[int]:
    """_device, and the device must exist: for calls that would otherwise ignore it."""
    n = _device(value, none=none)
    if n is not None and not 0 <= n < device_count():
        raise InvalidArgumentError(f"device {n} does not exist ({device_count()} device(s))")
    return n


def _flag(what: str, value: Any) -> bool:
    kind = type(value)
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")):
        return bool(value)
    raise TypeError(f"{what} must be a bool, not {type(value).__name__} ({value!r})")


def _path(what: str, value: Any) -> str:
    """A file path: str or os.PathLike (bytes paths are decoded as the file system does)."""
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise TypeError(f"{what} must be a path (str or os.PathLike), not "
                        f"{type(value).__name__} ({value!r})") from None


# The pool's options (pool_options in C++) and their defaults, from the extension (C++ is their one
# source; None: an unlimited maximum_size); set_memory_manager takes them for the pool only.
_POOL_DEFAULTS = _gpumem.pool_defaults()


def _describe_pool_defaults() -> str:
    def shown(value: Any) -> str:
        if value is None:
            return "unlimited"
        if isinstance(value, bool) or value == 0:
            return str(value)
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if value % (1 << shift) == 0:
                return f"{value >> shift} {unit}"
        return str(value)

    return ", ".join(f"{key} {shown(value)}" for key, value in _POOL_DEFAULTS.items())


def _pool_options(given: dict) -> list:
    """The pool options in the extension's order, defaults for those not given, each checked."""
    values = []
    for key, default in _POOL_DEFAULTS.items():
        value = given.get(key)
        if value is None:
            value = default
        elif isinstance(default, bool):
            value = _flag(key, value)
        else:
            value = _size(key, value)
        values.append(value)
    return values


def _exportable(what: str, allocation: Any) -> "Allocation":
    """An Allocation with memory to export (IPC), else an error saying why."""
    if not isinstance(allocation, Allocation):
        raise TypeError(f"{what} needs a gpumem.Allocation, not {type(allocation).__name__} "
                        f"({allocation!r:.80})")
    if allocation.ptr == 0:
        raise InvalidArgumentError(f"{what}: {allocation!r} has no memory to export (0 bytes, or "
                                   "freed)")
    return allocation


def device_count() -> int:
    """Devices of gpumem's backend (GPUMEM_DEVICE=host simulates them on host threads)."""
    return _gpumem.device_count()


def current_device() -> int:
    return _gpumem.current_device()


def set_memory_manager(name: str, device: Optional[int] = None, *, log: str = "",
                       initial_size: Optional[int] = None, chunk_size: Optional[int] = None,
                       maximum_size: Optional[int] = None, max_cached_size: Optional[int] = None,
                       expandable: Optional[bool] = None, trim_before_growth: Optional[bool] = None,
                       wait_across_streams: Optional[bool] = None) -> None:
    """Chooses the memory manager of ``device`` (every device when None).

    ``name``: ``default`` (cudaMalloc, deferred frees), ``host_only`` (frees at once), ``pool``
    (gpumem's pool; the keyword options are its pool_options), ``async`` (cudaMallocAsync), or the
    path of a C++ plugin library. ``log``: a CSV allocation log written by the pool or async
    manager (``python -m gpumem.plot`` draws it). Closes the device's existing gpumem context, so
    the next allocation binds the new manager; memory already handed out stays valid and goes back
    to the manager that made it. The pool options (None: the pool's default: POOL_DEFAULTS)
    are for ``pool`` only. Raises
    InvalidArgumentError for an unknown name, a device that does not exist, bad options or
    options given to another manager; TypeError for arguments of the wrong type.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__} ({name!r})")
    device = _existing_device(device)
    given = {k: v for k, v in (("initial_size", initial_size), ("chunk_size", chunk_size),
                               ("maximum_size", maximum_size),
                               ("max_cached_size", max_cached_size), ("expandable", expandable),
                               ("trim_before_growth", trim_before_growth),
                               ("wait_across_streams", wait_across_streams)) if v is not None}
    if given and name != "pool":
        raise InvalidArgumentError(
            f"set_memory_manager: the pool options {sorted(given)} were given for the {name!r} "
            "manager, which takes none (only 'pool' does)")
    _gpumem.set_memory_manager(name, device, _path("log", log), *_pool_options(given))


if set_memory_manager.__doc__:  # None under python -OO
    set_memory_manager.__doc__ = set_memory_manager.__doc__.replace("POOL_DEFAULTS",
                                                                    _describe_pool_defaults())


def reset_memory_managers() -> None:
    """Back to GPUMEM_MEMORY_MANAGER's choice for every device (closes every context)."""
    _gpumem.reset_memory_managers()


def manager_name(device: Optional[int] = None) -> str:
    return _gpumem.manager_name(_device(device))


def memalloc(nbytes: int, device: Optional[int] = None) -> Allocation:
    """Device memory with the EMM's synchronous semantics: usable by any stream on return."""
    return _gpumem.memalloc(_size("nbytes", nbytes), _device(device))


def allocate(nbytes: int, stream: int = 0, device: Optional[int] = None) -> Allocation:
    """Device memory for work on ``stream`` (a cudaStream_t as an int; 0 the default stream),
    freed on that stream when the Allocation dies. The stream must stay alive until then;
    call release_stream() before destroying a stream that the pool has seen."""
    return _gpumem.allocate(_size("nbytes", nbytes), _stream(stream), _device(device))


def memhostalloc(nbytes: int, mapped: bool = False, portable: bool = False,
                 write_combined: bool = False, device: Optional[int] = None) -> HostAllocation:
    """Pinned host memory (mapped into the device's address space when ``mapped``)."""
    return _gpumem.memhostalloc(_size("nbytes", nbytes), _flag("mapped", mapped),
                                _flag("portable", portable),
                                _flag("write_combined", write_combined), _device(device))


def release_stream(stream: int, device: Optional[int] = None) -> None:
    """Tells the device's manager that ``stream`` is about to be destroyed (the pool gives back
    what it keeps for it). Call it after the allocations made on the stream are freed."""
    _gpumem.release_stream(_stream(stream), _device(device))


def get_ipc_handle(allocation: Allocation) -> tuple:
    """(64-byte CUDA IPC handle of the allocation's base, exported size, offset in the base)."""
    return _gpumem.get_ipc_handle(_exportable("get_ipc_handle", allocation))


def statistics(device: Optional[int] = None) -> MemoryStatistics:
    return MemoryStatistics(**_gpumem.statistics(_device(device)))


def memory_info(device: Optional[int] = None) -> tuple:
    """(free, total) bytes as the manager sees them; NotSupportedError where it cannot tell."""
    return _gpumem.memory_info(_device(device))


@contextlib.contextmanager
def defer_cleanup(device: Optional[int] = None) -> Iterator[None]:
    """Nothing queued for deallocation is freed while inside (guards nest; an exception ends the
    deferral too). Leaving the outermost flushes the queue if it is over its limits. What is
    queued: every free of the default manager; see docs/python.md for the others."""
    guard = _gpumem.defer_cleanup(_device(device))
    try:
        yield
    finally:
        guard.release()


def flush(device: Optional[int] = None) -> int:
    """Runs the device's deferred frees now (unless deferred); returns how many ran."""
    return _gpumem.flush(_device(device))


def reset(device: Optional[int] = None) -> None:
    """The manager's reset(): flushes pending frees and trims caches; live memory stays."""
    _gpumem.reset(_device(device))


def close(device: Optional[int] = None) -> None:
    """Destroys gpumem's context of ``device`` (all when None), flushing its queues; the next use
    makes a new one. Live memory stays valid and is freed by its owner. InvalidArgumentError for a
    device that does not exist."""
    _gpumem.close(_existing_device(device))


def close_for_device_reset(device: int) -> None:
    """close(device) before the device's CUDA context is reset under gpumem (Numba's
    cuda.close()): everything releasable goes now; memory still live is left to the reset (its
    later frees make no CUDA call) and, if no reset follows, stays valid but is never reused."""
    _gpumem.close_for_device_reset(_existing_device(device, none=False))


def replay_log(path: str, target: str = "pool", *, honour_streams: bool = True,
               **pool_options: int) -> dict:
    """Replays a CSV allocation log against a fresh ``pool`` (with pool options) or ``cuda``
    (plain device allocations). Returns the replay's counts, ``peak_live_bytes``,
    ``peak_held_bytes``, ``fragmentation`` and ``held`` (the pool's held bytes after each
    replayed allocation and free)."""
    unknown = sorted(set(pool_options) - set(_POOL_DEFAULTS))
    if unknown:
        raise TypeError(f"replay_log() got unknown pool option(s) {unknown}; the pool's options "
                        f"are {sorted(_POOL_DEFAULTS)}")
    given = {k: v for k, v in pool_options.items() if v is not None}  # None: the default
    if given and target != "pool":
        raise InvalidArgumentError(f"replay_log: the pool options {sorted(given)} were "
                                   f"given for the target {target!r}, which takes none")
    return _gpumem.replay_log(_path("path", path), target, *_pool_options(given),
                              honour_streams=_flag("honour_streams", honour_streams))
