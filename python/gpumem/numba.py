"""gpumem as Numba's memory manager: an EMM plugin (numba-cuda's External Memory Management).

    NUMBA_CUDA_MEMORY_MANAGER=gpumem.numba python app.py
    # or, before the first CUDA use:  numba.cuda.set_memory_manager(gpumem.numba.GpumemNumbaManager)

Device memory comes from the device's gpumem memory manager (gpumem.set_memory_manager; by
default GPUMEM_MEMORY_MANAGER's choice). Host memory (pinned, mapped, managed) stays Numba's own
(HostOnlyCUDAMemoryManager); IPC export uses Numba's GetIpcHandleMixin (valid for the default and
pool managers; the async manager's memory cannot be exported with legacy IPC).

memalloc returns a MemoryPointer subclass that owns the gpumem allocation as an attribute: the
memory goes back when the Python object dies, without a weakref.finalize per allocation. After
initialize() the manager's memalloc is a function of the extension (_gpumem._numba_memalloc's,
an instance attribute that shadows the method): it allocates and makes the pointer object itself
(the class's __new__, no __init__, four attributes set in C), with no Python frame of ours.

defer_cleanup(): Numba's host-side queue and gpumem's deferred-deallocation queue are both held.
Every device free of memalloc's memory is queued (default, pool and async managers alike), so
nothing is freed inside. The queue's count and ratio limits are Numba's; with the pool and async
managers a batch that passes them is retired, and retired batches go back to the pool together
after ONE device synchronisation (once more than 16 times the count limit or 1/16 of the ratio's
bytes are retired; at once on out-of-memory, reset and flush), so memory dropped while kernels on
any stream still use it is safe; memalloc itself does not synchronise.

reset() (ctx.reset(), cuda.close()) resets the manager and closes gpumem's context of the device:
cuda.close() resets the primary context next, which destroys every allocation in it, so gpumem must
never hand out memory of the old context again.

This module imports numba when imported itself; ``import gpumem`` does not.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from typing import Iterator

from numba import cuda as _cuda
from numba.cuda.cudadrv import driver as _driver

from . import _gpumem
from ._errors import OutOfMemoryError as _GpumemOutOfMemory

__all__ = ["GpumemNumbaManager", "OutOfMemoryError"]

_binding = _driver.binding


class OutOfMemoryError(_driver.CudaAPIError, MemoryError):
    """Out of device memory through gpumem: catchable as Numba's CudaAPIError or MemoryError;
    ``requested_bytes`` as gpumem.OutOfMemoryError."""

    def __init__(self, error: _GpumemOutOfMemory) -> None:
        super().__init__(_binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY, str(error))
        self.requested_bytes = error.requested_bytes
        self.allocator = error.allocator
        self.current_bytes = error.current_bytes
        self.peak_bytes = error.peak_bytes

    def __reduce__(self):
        # Pickled as its fields (Dask sends a worker's exceptions to the client): the default
        # would call __init__ with CudaAPIError's (code, message) arguments.
        message = getattr(self, "msg", None) or str(self)
        return (_rebuild_out_of_memory, (message, self.requested_bytes, self.allocator,
                                         self.current_bytes, self.peak_bytes))


def _rebuild_out_of_memory(message, requested_bytes, allocator, current_bytes, peak_bytes):
    return OutOfMemoryError(_GpumemOutOfMemory(message, requested_bytes, allocator, current_bytes,
                                               peak_bytes))


class _GpumemPointer(_cuda.MemoryPointer):
    """A MemoryPointer whose memory is the gpumem allocation it holds (lifetime = this object).

    Made by the extension's memalloc (_gpumem._numba_memalloc), which sets ``context``, ``size``
    and ``_allocation`` (a _gpumem.BlockAllocation) on an instance whose __init__ never runs
    (MemoryPointer.__init__ would make a CUdeviceptr and, with a finalizer, a weakref.finalize).
    What MemoryPointer.__init__ sets to the same value for every pointer without a finalizer is a
    class attribute here: ``is_managed`` False (free() does nothing; the memory goes with the
    object), ``refct`` 1 (OwnedPointer's ``+= 1`` makes an instance attribute), ``_owner`` None
    (``owner`` is the pointer itself); ``_cuda_memsize_``, always ``size`` for a pointer that is not
    a view, is a property over it (Numba reads it only for memory it did not allocate itself, and
    sets it only where it reads None). ``device_pointer`` and ``handle`` (a cuda.bindings
    CUdeviceptr, about 200 ns to make) are made on first use and then kept as plain attributes: an
    array that never reaches a kernel or a copy does not pay for them."""

    __cuda_memory__ = True
    is_managed = False
    refct = 1
    _owner = None

    def __init__(self, context, allocation, size: int) -> None:  # no super().__init__: no finalizer
        # The Python spelling of what the extension's memalloc does (kept for tests and tools).
        self.context = context
        self.size = size
        self._allocation = allocation

    @property
    def _cuda_memsize_(self) -> int:
        return self.size

    @functools.cached_property
    def device_pointer(self):
        return _binding.CUdeviceptr(self._allocation.ptr)

    @functools.cached_property
    def handle(self):
        return self.device_pointer


_devices_reset: set = set()


def _after_reset_release_at_exit(device: int) -> None:
    """After a primary-context reset, the device's next context is Numba's alone (the CUDA runtime
    no longer holds it), and it may be gone when gpumem's own state is destroyed at process exit,
    whose frees would then fail. So, once a device was reset, gpumem lets go of that device at
    exit (an atexit handler, which runs before the interpreter's teardown) with Numba's context
    current: free memory goes back, memory still owned by live arrays is left to the process's
    end, and nothing later touches the device."""
    if not _devices_reset:
        import atexit

        atexit.register(_release_reset_devices)
    _devices_reset.add(device)


def _release_reset_devices() -> None:
    for device in sorted(_devices_reset):
        try:
            with _cuda.gpus[device]:
                _gpumem.close_for_device_reset(device)
        except Exception:  # pragma: no cover - best effort at exit
            pass


class GpumemNumbaManager(_cuda.GetIpcHandleMixin, _cuda.HostOnlyCUDAMemoryManager):
    """Numba's EMM plugin over gpumem (one instance per Numba context, i.e. per device)."""

    def __init__(self, *args, **kwargs) -> None:
        # No CUDA and no gpumem here: set_memory_manager builds one with context=None only to read
        # interface_version.
        super().__init__(*args, **kwargs)
        self._device = None

    def initialize(self) -> None:
        # Called on every context push: cheap after the first call.
        if self._device is not None:
            return
        import weakref

        device = self.context.device.id
        proxy = weakref.proxy(self.context)
        _gpumem.manager_name(device)  # binds gpumem's context of the device now
        # Out of memory (after gpumem's own flush and retry): arrays in reference cycles hold
        # memory only the collector frees, so collect and try once more, then Numba's error. The
        # callback holds no reference to the manager (no cycle through the instance attribute).
        retry = _gpumem._numba_memalloc(_GpumemPointer, proxy, device, None)

        def after_out_of_memory(size: int):
            gc.collect()
            try:
                return retry(size)
            except _GpumemOutOfMemory as error:
                raise OutOfMemoryError(error) from error

        # From now on Numba's self.memory_manager.memalloc(n) finds the extension's function.
        self.memalloc = _gpumem._numba_memalloc(_GpumemPointer, proxy, device,
                                                after_out_of_memory)
        self._device = device
        # Numba's host queue counts mapped bytes against a capacity that only Numba's own manager
        # sets; left at 0, every mapped free would flush the queue.
        try:
            _free, total = _driver.driver.cuMemGetInfo()
            self.deallocations.memory_capacity = total
        except Exception:  # pragma: no cover - informational only
            pass

    def memalloc(self, size: int):
        # Only before initialize() (and after reset()): initialize() puts the extension's memalloc
        # in the instance, which Numba's calls find first.
        self.initialize()
        return self.memalloc(size)

    def get_memory_info(self):
        # gpumem.NotSupportedError is a NotImplementedError, which Numba's callers expect.
        free, total = _gpumem.memory_info(self._device if self._device is not None else
                                          self.context.device.id)
        return _cuda.MemoryInfo(free=free, total=total)

    def reset(self) -> None:
        super().reset()
        if self.context is None:
            return
        device = self.context.device.id
        _gpumem.reset(device)
        # cuda.close() follows with a primary-context reset, which frees every allocation of the
        # context: gpumem releases all it can now, while the context lives, and memory that live
        # arrays still own is left to the reset (its later frees make no CUDA call). After a
        # ctx.reset() alone, that memory stays valid but is never reused (Numba's own manager
        # frees it outright).
        _gpumem.close_for_device_reset(device)
        self._device = None
        try:
            del self.memalloc  # the next call initialises again
        except AttributeError:
            pass
        _after_reset_release_at_exit(device)

    @contextlib.contextmanager
    def defer_cleanup(self) -> Iterator[None]:
        device = self._device if self._device is not None else self.context.device.id
        with super().defer_cleanup():
            guard = _gpumem.defer_cleanup(device)
            try:
                yield
            finally:
                guard.release()

    @property
    def interface_version(self) -> int:
        return 1


_numba_memory_manager = GpumemNumbaManager
