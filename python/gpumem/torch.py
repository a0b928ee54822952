"""gpumem as PyTorch's CUDA allocator.

    import torch, gpumem.torch
    gpumem.torch.use()          # before the first CUDA tensor
    x = torch.empty(1 << 20, device="cuda")
    print(gpumem.torch.memory_stats())

use() installs torch.cuda.memory.CUDAPluggableAllocator over two functions that gpumem's extension
exports (include/gpumem/python/torch_allocator.h): allocations are stream-ordered on the stream
PyTorch passes (its current stream) from the device's gpumem manager (gpumem.set_memory_manager,
e.g. the pool). A failed allocation raises (PyTorch reports it as RuntimeError naming gpumem's
out-of-memory error); it never returns null.

Limits of PyTorch's pluggable-allocator interface: torch.cuda.memory_stats() and friends raise
(use memory_stats() here), Tensor.record_stream() does nothing (synchronise instead before
freeing a tensor used on another stream), and CUDA graph capture is not supported: an allocation
on a stream being captured (torch.cuda.graph) raises a RuntimeError that names the stream and
says so, before the pool is asked (docs/python.md).
This module imports torch when imported itself; ``import gpumem`` does not.
"""

from __future__ import annotations

import inspect
from typing import Optional

import torch as _torch

from . import _gpumem, set_memory_manager, statistics

__all__ = ["allocator", "use", "memory_stats", "live_allocations"]

_allocator = None


def allocator():
    """The CUDAPluggableAllocator over gpumem (built once)."""
    global _allocator
    if _allocator is None:
        _allocator = _torch.cuda.memory.CUDAPluggableAllocator(
            _gpumem.__file__, "gpumem_torch_alloc", "gpumem_torch_free")
    return _allocator


def use(pool_options: Optional[dict] = None) -> None:
    """Makes gpumem PyTorch's CUDA allocator. Raises RuntimeError if PyTorch's own allocator has
    already served memory (it cannot be swapped then): call this first thing, before any CUDA
    tensor is made (or use torch.cuda.MemPool(gpumem.torch.allocator().allocator()) for a scope).

    ``pool_options`` (a dict of gpumem.set_memory_manager's pool keywords, e.g.
    ``{"expandable": True}``): every device gets gpumem's pool with them first. None keeps the
    manager already chosen (gpumem.set_memory_manager or GPUMEM_MEMORY_MANAGER). The manager is
    changed only once PyTorch took the allocator: a refused call changes nothing (CuPy and Numba
    in the same process keep their memory). An unknown option is a TypeError before anything
    changes; a value the pool refuses is an InvalidArgumentError after PyTorch took the allocator
    (the manager stays as it was: call gpumem.set_memory_manager with corrected options)."""
    if pool_options is not None:
        allowed = set(inspect.signature(set_memory_manager).parameters) - {"name", "device"}
        unknown = sorted(set(pool_options) - allowed)
        if unknown:
            raise TypeError(f"gpumem.torch.use(): unknown pool option(s) {unknown}; the options "
                            f"are {sorted(allowed)}")
    try:
        _torch.cuda.memory.change_current_allocator(allocator())
    except RuntimeError as error:
        raise RuntimeError(
            "gpumem.torch.use(): PyTorch's CUDA allocator is already in use, so it cannot be "
            "replaced; call gpumem.torch.use() before the first CUDA tensor (and before importing "
            "libraries that allocate on import), or take segments from gpumem for a scope with "
            "torch.cuda.MemPool(gpumem.torch.allocator().allocator())") from error
    if pool_options is not None:
        set_memory_manager("pool", None, **pool_options)


def memory_stats(device: Optional[int] = None) -> dict:
    """gpumem's statistics of the device (torch.cuda.memory_stats() is unavailable under a
    pluggable allocator): allocated, peak, reserved (held) bytes, allocations, retries."""
    if device is None:
        device = _torch.cuda.current_device()
    s = statistics(device)
    return {
        "allocated_bytes": s.bytes_in_use,
        "peak_allocated_bytes": s.peak_bytes,
        "reserved_bytes": s.held_bytes,
        "allocations": s.allocations,
        "total_allocations": s.total_allocations,
        "out_of_memory_retries": s.out_of_memory_retries,
        "manager": s.manager,
    }


def live_allocations() -> int:
    """Allocations PyTorch holds through gpumem now (every device)."""
    import ctypes

    lib = ctypes.CDLL(_gpumem.__file__)
    lib.gpumem_torch_live_allocations.restype = ctypes.c_size_t
    return int(lib.gpumem_torch_live_allocations())
