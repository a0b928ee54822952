"""gpumem as CuPy's allocator.

    import cupy, gpumem.cupy
    gpumem.cupy.use()                      # or cupy.cuda.set_allocator(gpumem.cupy.malloc)
    gpumem.cupy.use(pinned=True)           # also cupy.cuda.set_pinned_memory_allocator

malloc(nbytes) allocates stream-ordered on CuPy's current stream from the current device's gpumem
manager (gpumem.set_memory_manager); the memory goes back on that stream when CuPy drops the last
reference. malloc is the extension's (C++): per call no Python runs. Out of memory: gc.collect()
and one retry, then cupy.cuda.memory.OutOfMemoryError (a MemoryError; the gpumem error is its
__cause__).

Streams: the pool keeps memory freed on a stream for that stream, so a stream must not be
destroyed while the pool holds such memory. The extension keeps a reference to every CuPy stream
it allocated on, so CuPy cannot destroy one behind the pool's back; release_stream(stream) (after
the stream's allocations are freed) or empty_cache() gives a stream back to the pool and drops that
reference. A stream the program has dropped, with no array of it left, is given back by the
extension itself, when a new stream comes and the registry has grown (to 16 streams, then to twice
its size after the last such look): a program that creates and drops streams keeps a registry of
about the streams it still uses. Each block allocated on such a stream holds the stream object too
until its free, so CuPy destroys a stream only after the frees ordered on it, whichever of arrays
and stream the program drops first. The null and per-thread default streams need none of this. An
ExternalStream is the caller's: call release_stream before destroying what it wraps, and free its
arrays first.

Thread safety: as CuPy's allocator interface (any thread; the stream table is guarded by the GIL).
This module imports cupy when imported itself; ``import gpumem`` does not.
"""

from __future__ import annotations

import gc
from typing import Any

import cupy as _cupy
from cupy.cuda import memory as _memory
from cupy.cuda import runtime as _runtime

from . import _gpumem
from ._errors import OutOfMemoryError as _GpumemOutOfMemory

__all__ = ["malloc", "pinned_malloc", "use", "release_stream", "empty_cache"]


def _raise_oom(nbytes: int, error: _GpumemOutOfMemory) -> None:
    raise _memory.OutOfMemoryError(nbytes, error.current_bytes, 0) from error


def _keep_stream(device: int, handle: int) -> Any:
    """Called by the extension the first time it allocates on a (device, stream): CuPy's stream
    object, which the extension keeps alive until release_stream, empty_cache, or the program has
    dropped it and no block of it lives (each block of the stream holds it too, until its free)."""
    return _cupy.cuda.get_current_stream()


def _malloc_after_out_of_memory(nbytes: int) -> "_memory.MemoryPointer":
    """The extension's out-of-memory path: gc.collect() and one retry (malloc's own path, so the
    block holds its stream as every block does), then CuPy's error."""
    gc.collect()
    try:
        return _gpumem._cupy_malloc_no_retry(nbytes)
    except _GpumemOutOfMemory as error:
        _raise_oom(nbytes, error)


def _current_stream_capsule():
    """CuPy's cdef get_current_stream_ptr (``intptr_t (void)``) as a capsule, or None where this
    CuPy does not export it (the extension then asks cupy.cuda.get_current_stream())."""
    try:
        from cupy_backends.cuda import stream as _stream_module

        return _stream_module.__pyx_capi__.get("get_current_stream_ptr")
    except (ImportError, AttributeError):  # pragma: no cover - depends on CuPy's build
        return None


_gpumem._cupy_setup(_current_stream_capsule(), lambda: _cupy.cuda.get_current_stream().ptr,
                    _memory.UnownedMemory, _memory.MemoryPointer, _keep_stream,
                    _malloc_after_out_of_memory)

malloc = _gpumem._cupy_malloc
"""The allocator for cupy.cuda.set_allocator: ``malloc(nbytes)``, stream-ordered on CuPy's
current stream of the current device; returns ``MemoryPointer(UnownedMemory(ptr, nbytes,
allocation, device), 0)``. In C (the extension): the device from the CUDA runtime, the stream from
CuPy's exported get_current_stream_ptr, no Python frame; Python only for a stream seen for the first
time and for out-of-memory."""


def pinned_malloc(nbytes: int) -> Any:
    """The allocator for cupy.cuda.set_pinned_memory_allocator: pinned host memory of gpumem."""
    host = _gpumem.memhostalloc(nbytes, device=_runtime.getDevice())
    return _cupy.cuda.PinnedMemoryPointer(host, 0)


def use(pinned: bool = False) -> None:
    """Installs malloc (and pinned_malloc when ``pinned``) as CuPy's allocators."""
    _cupy.cuda.set_allocator(malloc)
    if pinned:
        _cupy.cuda.set_pinned_memory_allocator(pinned_malloc)


def release_stream(stream: Any) -> None:
    """Gives ``stream`` back: waits for it, tells the pool (which returns what it kept for the
    stream) and drops this module's reference. Arrays of the stream may outlive the call: each
    one's free waits for the stream and keeps nothing of it, and each holds the stream object
    until then, so CuPy destroys the stream after the last of them."""
    handle = stream.ptr
    for device, known, kept in _gpumem._cupy_known_streams():
        if known == handle:
            _release(device, handle, kept)


def _release(device: int, handle: int, kept: Any) -> None:
    _gpumem._cupy_forget_stream(device, handle)
    kept.synchronize()
    _gpumem.release_stream(handle, device)


def empty_cache() -> None:
    """Releases every stream the extension keeps and resets each device's manager (the pool gives
    its free chunks back)."""
    known = _gpumem._cupy_known_streams()
    devices = {device for device, _, _ in known}
    for device, handle, kept in known:
        _release(device, handle, kept)
    devices.add(_runtime.getDevice())
    for device in devices:
        _gpumem.reset(device)
