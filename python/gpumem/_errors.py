"""The exceptions gpumem raises: gpumem's C++ errors with their fields.

The extension raises these (never a bare RuntimeError) so that callers can catch them by what went
wrong; each also derives from the built-in exception a Python programmer would expect.
"""

from __future__ import annotations


class GpumemError(RuntimeError):
    """Any gpumem error (the C++ gpumem::error)."""


class OutOfMemoryError(GpumemError, MemoryError):
    """An allocation failed after the manager's own recovery (flush the deferred frees, retry).

    Fields: ``requested_bytes``, ``allocator`` (what ran out), ``current_bytes`` and
    ``peak_bytes`` (that allocator's use when the request failed).
    """

    def __init__(self, message: str, requested_bytes: int = 0, allocator: str = "",
                 current_bytes: int = 0, peak_bytes: int = 0) -> None:
        super().__init__(message)
        self.requested_bytes = requested_bytes
        self.allocator = allocator
        self.current_bytes = current_bytes
        self.peak_bytes = peak_bytes


class NotSupportedError(GpumemError, NotImplementedError):
    """The manager or backend cannot do this (gpumem::not_supported)."""


class InvalidArgumentError(GpumemError, ValueError):
    """Bad input or a broken precondition (gpumem::logic_error)."""


class CudaError(GpumemError):
    """A CUDA call failed: ``code`` (the numeric CUDA error), ``code_name`` and ``call``."""

    def __init__(self, message: str, code: int = 0, code_name: str = "", call: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.code_name = code_name
        self.call = call
