"""gpumem on every Dask worker: a ``distributed`` worker plugin, per-worker statistics and a
combined memory timeline.

    from dask_cuda import LocalCUDACluster
    from distributed import Client
    import gpumem.dask

    client = Client(LocalCUDACluster(n_workers=2))
    gpumem.dask.setup(client, pool_size="20GB", maximum_pool_size=0.9, frameworks=["cupy"],
                      log_directory="/tmp/gpumem-logs")
    ...                                               # the Dask workload
    print(gpumem.dask.memory_statistics(client))      # {worker address: statistics dict}
    gpumem.dask.memory_timeline(client, "workers.png")  # one line per worker, from their logs

On each worker (``GpumemPlugin.setup``): checks gpumem's backend (``cuda`` unless the worker's
``GPUMEM_DEVICE`` says ``host``; a worker without a usable GPU is a ``NoDeviceError``), binds
gpumem to the worker's device (``device``, default 0: dask-cuda gives each worker its GPU as the
first visible one through ``CUDA_VISIBLE_DEVICES``), chooses the memory manager and its pool
(``gpumem.set_memory_manager``), and installs gpumem as the allocator of the frameworks asked for
(``numba``, ``cupy``, ``torch``; imported only then, a missing one is an ImportError).

Sizes (``pool_size``, ``maximum_pool_size``, ``chunk_size``, ``spill_device_limit``): an int of
bytes, a string with a unit (``"20GB"``, ``"512MiB"``: kB MB GB TB are powers of 1000, KiB MiB
GiB TiB of 1024, B bytes), or a float in (0, 1], a fraction of the worker's device memory.
Anything else is a ValueError naming the option and the value (on the client where the value
alone is wrong, on the worker where the device decides).

Idempotent: setting up again with the same options changes nothing on a worker; other options
reconfigure it (the new manager serves allocations from then on; memory already handed out stays
valid). A restarted worker is a new process: distributed runs the registered plugin on it again.
Spilling: gpumem has no Python binding of spilling yet, so ``spill_device_limit`` is checked and
reported but not applied (the report's ``spilling`` says so). Thread safety: the plugin and the
worker-side functions take a lock; every function may be called from any thread.
This module imports ``distributed`` when imported itself; ``import gpumem`` does not.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import tempfile
import threading
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from distributed.diagnostics.plugin import WorkerPlugin

from . import _gpumem
from ._errors import NotSupportedError

__all__ = [
    "GpumemPlugin", "NoDeviceError", "memory_statistics", "memory_timeline", "parse_size",
    "plot_worker_logs", "setup",
]

logger = logging.getLogger("gpumem.dask")

Size = Union[int, float, str]
FRAMEWORKS = ("numba", "cupy", "torch")
MANAGERS = ("default", "host_only", "pool", "async")
PLUGIN_NAME = "gpumem"


class NoDeviceError(RuntimeError):
    """A worker cannot use the backend asked for (no usable GPU for ``cuda``)."""


# --- sizes -----------------------------------------------------------------------------------

_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)?\s*$")
_VALID_SIZES = ("an int of bytes, a string such as '20GB' or '512MiB' (units B, kB, MB, GB, TB, "
                "KiB, MiB, GiB, TiB), or a fraction of the device's memory in (0, 1] such as 0.8")


@dataclasses.dataclass(frozen=True)
class _SizeSpec:
    """A checked size: ``bytes`` exactly, or ``fraction`` of the device's memory."""

    option: str
    bytes: Optional[int] = None
    fraction: Optional[float] = None

    def resolve(self, device_bytes: Optional[int]) -> int:
        if self.bytes is not None:
            return self.bytes
        if device_bytes is None:
            raise ValueError(f"{self.option}={self.fraction!r}: a fraction of the device's memory, "
                             "but the worker's memory manager cannot tell the device's size; "
                             "give the size in bytes")
        return int(self.fraction * device_bytes) // 256 * 256  # 256: the allocation granule


def _check_size(value: Any, option: str) -> _SizeSpec:
    def bad(why: str) -> ValueError:
        return ValueError(f"{option}={value!r} is not a valid size ({why}); "
                          f"expected {_VALID_SIZES}")

    if isinstance(value, bool) or value is None:
        raise bad("not a number")
    if isinstance(value, int):
        if value < 0:
            raise bad("negative")
        return _SizeSpec(option, bytes=value)
    if isinstance(value, float):
        if not math.isfinite(value) or not 0 < value <= 1:
            raise bad("a float is a fraction of the device and must be in (0, 1]")
        return _SizeSpec(option, fraction=value)
    if isinstance(value, str):
        match = _SIZE_TEXT.match(value)
        if match is None:
            raise bad("not a number with an optional unit")
        number, unit = match.group(1), match.group(2)
        if unit is None:
            return _check_size(float(number) if "." in number else int(number), option)
        scale = _UNITS.get(unit.lower())
        if scale is None:
            raise bad(f"unknown unit {unit!r}")
        whole, _, decimals = number.partition(".")
        # Exact arithmetic: "1.5GB" is 1500000000 bytes; a fraction of a byte is refused.
        numerator = int(whole + decimals) * scale
        denominator = 10 ** len(decimals)
        if numerator % denominator:
            raise bad("not a whole number of bytes")
        return _SizeSpec(option, bytes=numerator // denominator)
    raise bad(f"of type {type(value).__name__}")


def parse_size(value: Size, option: str = "size", device_bytes: Optional[int] = None) -> int:
    """Bytes of ``value`` (see the module's documentation); a fraction needs ``device_bytes``.
    Raises ValueError naming ``option`` and ``value`` when the value is not a size."""
    return _check_size(value, option).resolve(device_bytes)


# --- the configuration and the plugin ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Config:
    manager: str
    device: int
    backend: Optional[str]
    pool_size: Optional[_SizeSpec]
    maximum_pool_size: Optional[_SizeSpec]
    chunk_size: Optional[_SizeSpec]
    expandable: bool
    frameworks: Tuple[str, ...]
    cupy_pinned: bool
    log_directory: Optional[str]
    spill_device_limit: Optional[_SizeSpec]


def _make_config(manager: str = "pool", *, device: int = 0, backend: Optional[str] = None,
                 pool_size: Optional[Size] = None, maximum_pool_size: Optional[Size] = None,
                 chunk_size: Optional[Size] = None, expandable: bool = False,
                 frameworks: Iterable[str] = (), cupy_pinned: bool = False,
                 log_directory: Optional[str] = None,
                 spill_device_limit: Optional[Size] = None) -> _Config:
    if not isinstance(manager, str) or not manager:
        raise ValueError(f"manager={manager!r}: expected one of {', '.join(MANAGERS)} or the "
                         "path of a C++ plugin library")
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"device={device!r}: expected a device ordinal >= 0 (0 is the worker's "
                         "first visible GPU)")
    if backend not in (None, "cuda", "host"):
        raise ValueError(f"backend={backend!r}: expected 'cuda', 'host' or None (the worker's "
                         "GPUMEM_DEVICE, else 'cuda')")
    if isinstance(frameworks, str):
        frameworks = [frameworks]
    frameworks = tuple(frameworks)
    for name in frameworks:
        if name not in FRAMEWORKS:
            raise ValueError(f"frameworks: {name!r} is not one of {', '.join(FRAMEWORKS)}")
    sizes = {"pool_size": pool_size, "maximum_pool_size": maximum_pool_size,
             "chunk_size": chunk_size}
    checked = {k: None if v is None else _check_size(v, k) for k, v in sizes.items()}
    if manager != "pool":
        given = [k for k, v in sizes.items() if v is not None]
        given += ["expandable"] if expandable else []
        if given:
            raise ValueError(f"{', '.join(given)}: pool options, but manager={manager!r}; "
                             "use manager='pool'")
    if checked["chunk_size"] is not None and checked["chunk_size"].bytes == 0:
        raise ValueError(f"chunk_size={chunk_size!r}: must be more than 0 bytes")
    if checked["maximum_pool_size"] is not None and checked["maximum_pool_size"].bytes == 0:
        raise ValueError(f"maximum_pool_size={maximum_pool_size!r}: must be more than 0 bytes")
    spill = None if spill_device_limit is None else _check_size(spill_device_limit,
                                                                "spill_device_limit")
    return _Config(manager, device, backend, checked["pool_size"], checked["maximum_pool_size"],
                   checked["chunk_size"], bool(expandable), frameworks, bool(cupy_pinned),
                   None if log_directory is None else os.fspath(log_directory), spill)


class GpumemPlugin(WorkerPlugin):
    """Configures gpumem on each worker (see the module's documentation for the options).

    The options are checked when the plugin is made, so a bad value fails on the client; what
    depends on the worker (its backend, its device, fractions of its memory, the frameworks it
    has) fails in ``setup`` on the worker and reaches the client from ``register_plugin``.
    """

    name = PLUGIN_NAME
    idempotent = False  # registering again replaces the plugin, and setup() compares configs

    def __init__(self, manager: str = "pool", **options: Any) -> None:
        self.config = _make_config(manager, **options)

    def setup(self, worker: Any = None) -> None:
        _configure(self.config, _worker_label(worker))

    def teardown(self, worker: Any = None) -> None:
        # Nothing to undo: frameworks cannot all drop an installed allocator (PyTorch), and memory
        # handed out stays valid. The worker keeps gpumem's configuration until set up again.
        pass


def setup(client: Any, manager: str = "pool", **options: Any) -> GpumemPlugin:
    """Registers ``GpumemPlugin(manager, **options)`` on every worker of ``client``, now and on
    workers that join or restart later. Raises the first worker's error (ValueError,
    NoDeviceError, ImportError, ...) if any worker fails; the plugin is then unregistered, so no
    later worker runs the failed configuration."""
    plugin = GpumemPlugin(manager, **options)
    try:
        client.register_plugin(plugin, name=PLUGIN_NAME)
    except Exception:
        try:
            client.unregister_worker_plugin(PLUGIN_NAME)
        except Exception:  # pragma: no cover - the original error matters more
            pass
        raise
    return plugin


# --- what runs on a worker --------------------------------------------------------------------

_lock = threading.RLock()
_state: Dict[str, Any] = {}  # this process's applied configuration (empty: not set up)


def _worker_label(worker: Any) -> str:
    if worker is None:
        return f"pid {os.getpid()}"
    return str(getattr(worker, "address", None) or getattr(worker, "name", os.getpid()))


def _check_backend(requested: str, label: str) -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        kind = _gpumem.backend_kind()
    except NotSupportedError as error:
        raise NoDeviceError(f"worker {label}: gpumem's cuda backend was asked for, but no CUDA "
                            f"device can be used (CUDA_VISIBLE_DEVICES={visible!r}): "
                            f"{error}") from None
    if kind == requested:
        return kind
    if requested == "cuda":
        raise NoDeviceError(f"worker {label}: gpumem's cuda backend was asked for, but this "
                            f"worker has no usable CUDA device (CUDA_VISIBLE_DEVICES={visible!r}); "
                            "gpumem runs on its host backend here. Give the worker a GPU, or ask "
                            "for backend='host' (GPUMEM_DEVICE=host) for the simulated device")
    raise NoDeviceError(f"worker {label}: backend={requested!r} was asked for, but gpumem already "
                        f"runs on its {kind} backend in this process (chosen when gpumem was "
                        "first used); set GPUMEM_DEVICE in the worker's environment before it "
                        "starts")


def _install_framework(name: str, label: str, pinned: bool) -> None:
    try:
        if name == "cupy":
            from . import cupy as bridge

            bridge.use(pinned=pinned)
        elif name == "numba":
            from numba import cuda

            from . import numba as bridge

            # Applies to Numba contexts made from now on: set up before the worker's first Numba
            # CUDA use (os.environ also covers a later re-import in this process).
            os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gpumem.numba"
            cuda.set_memory_manager(bridge.GpumemNumbaManager)
        else:
            from . import torch as bridge

            if not _state.get("torch_installed"):
                bridge.use()
                _state["torch_installed"] = True
    except ImportError as error:
        raise ImportError(f"worker {label}: frameworks includes {name!r}, but it cannot be "
                          f"imported on this worker ({error})") from error


def _configure(config: _Config, label: str) -> Dict[str, Any]:
    with _lock:
        if _state.get("config") == config:
            return dict(_state)  # the same configuration again: nothing changes
        requested = config.backend or os.environ.get("GPUMEM_DEVICE") or "cuda"
        if requested not in ("cuda", "host"):
            raise ValueError(f"worker {label}: GPUMEM_DEVICE={requested!r}; expected cuda or host")
        # Decides the backend only if gpumem has not chosen one in this process yet.
        os.environ.setdefault("GPUMEM_DEVICE", requested)
        kind = _check_backend(requested, label)
        count = _gpumem.device_count()
        if config.device >= count:
            raise ValueError(f"worker {label}: device={config.device} but the worker sees "
                             f"{count} device(s) (CUDA_VISIBLE_DEVICES="
                             f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        try:
            device_bytes: Optional[int] = int(_gpumem.memory_info(config.device)[1])
        except NotSupportedError:
            device_bytes = None
        resolve = {k: getattr(config, k) for k in ("pool_size", "maximum_pool_size", "chunk_size")}
        sizes = {k: v.resolve(device_bytes) for k, v in resolve.items() if v is not None}
        if "pool_size" in sizes and "maximum_pool_size" in sizes and \
                sizes["maximum_pool_size"] < sizes["pool_size"]:
            raise ValueError(f"worker {label}: maximum_pool_size={sizes['maximum_pool_size']} "
                             f"bytes is less than pool_size={sizes['pool_size']} bytes")
        if device_bytes is not None:
            for k, v in sizes.items():
                if k != "chunk_size" and v > device_bytes:
                    raise ValueError(f"worker {label}: {k}={getattr(config, k).bytes} bytes is "
                                     f"more than the device's {device_bytes} bytes")
        spill = None if config.spill_device_limit is None else \
            config.spill_device_limit.resolve(device_bytes)

        log_path = ""
        if config.log_directory:
            os.makedirs(config.log_directory, exist_ok=True)
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_")
            log_path = os.path.join(config.log_directory, f"gpumem-{safe}-{os.getpid()}.csv")
        pool: Dict[str, Any] = {}
        if config.manager == "pool":
            if "pool_size" in sizes:
                pool["initial_size"] = sizes["pool_size"]
            if "maximum_pool_size" in sizes:
                pool["maximum_size"] = sizes["maximum_pool_size"]
            if "chunk_size" in sizes:
                pool["chunk_size"] = sizes["chunk_size"]
            pool["expandable"] = config.expandable
        from . import set_memory_manager

        set_memory_manager(config.manager, config.device, log=log_path, **pool)
        _gpumem.manager_name(config.device)  # binds the device's context now: errors show here
        for name in config.frameworks:
            _install_framework(name, label, config.cupy_pinned)
        if spill is not None:
            logger.warning("gpumem.dask: spill_device_limit=%d bytes accepted but not applied: "
                           "gpumem has no Python binding of spilling yet", spill)
        _state.update(config=config, backend=kind, device=config.device, log=log_path,
                      device_bytes=device_bytes, pool=pool, frameworks=list(config.frameworks),
                      spill_device_limit=spill,
                      spilling="not available: gpumem has no Python binding of spilling yet")
        return dict(_state)


def _worker_report(dask_worker: Any = None) -> Dict[str, Any]:
    """Runs on a worker (client.run): gpumem's statistics of the worker's device and how gpumem
    is set up there."""
    from . import statistics

    with _lock:
        device = _state.get("device", 0)
        report = dataclasses.asdict(statistics(device))
        report.update(
            configured="config" in _state, pid=os.getpid(), backend=_gpumem.backend_kind(),
            log=_state.get("log", ""), frameworks=_state.get("frameworks", []),
            device_bytes=_state.get("device_bytes"), pool=dict(_state.get("pool", {})),
            spill_device_limit=_state.get("spill_device_limit"),
            spilling=_state.get("spilling", "not available"),
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
        return report


def _worker_log(dask_worker: Any = None) -> Tuple[str, str]:
    """Runs on a worker: (path, text) of its allocation log ('', '' without one)."""
    with _lock:
        path = _state.get("log", "")
    if not path:
        return "", ""
    with open(path) as f:
        text = f.read()
    # A line being written may be cut: keep whole lines only.
    return path, text[:text.rfind("\n") + 1]


# --- what runs on the client ------------------------------------------------------------------

def memory_statistics(client: Any, workers: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    """{worker address: gpumem's statistics of its device} (the fields of gpumem.statistics, and
    ``configured``, ``backend``, ``pid``, ``log``, ``frameworks``, ``device_bytes``, ``pool``,
    ``spill_device_limit``, ``spilling``, ``cuda_visible_devices``)."""
    return client.run(_worker_report, workers=list(workers) if workers else None)


def plot_worker_logs(logs: Mapping[str, str], output: str, title: str = "gpumem on Dask") -> str:
    """Draws one memory timeline (bytes in use over time) per allocation log, a line per worker,
    in one picture (``output``: .png or any matplotlib format). ``logs``: {label: log path}.
    Times are aligned on the wall clock (the logs' epoch seconds). Returns ``output``."""
    from .plot import _human, read_log, timeline

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = []
    for label, path in sorted(logs.items()):
        events = read_log(path)
        start = next((e.time for e in events if e.time), 0.0)
        lines.append((label, start, timeline(events, top=0)))
    starts = [s for _, s, t in lines if s and t.in_use]
    origin = min(starts) if starts else 0.0
    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=100)
    for label, start, t in lines:
        if not t.in_use:
            continue
        x = [v + (start - origin if start else 0.0) for v in t.times]
        peak = t.in_use[t.peak_index]
        ax.step(x, t.in_use, where="post", linewidth=1.2, label=f"{label} (peak {_human(peak)})")
    ax.set_title(title)
    ax.set_xlabel("seconds since the first event of any worker")
    ax.set_ylabel("bytes in use")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: _human(v)))
    ax.grid(alpha=0.3)
    if any(t.in_use for _, _, t in lines):
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)
    return output


def memory_timeline(client: Any, output: str, title: str = "gpumem on Dask") -> str:
    """Collects every worker's allocation log (setup(..., log_directory=...)) through the client,
    so workers on other nodes work too, and draws them in one picture (plot_worker_logs).
    Raises ValueError when no worker writes a log."""
    collected = {address: text for address, (path, text) in client.run(_worker_log).items()
                 if path}
    if not collected:
        raise ValueError("memory_timeline: no worker writes an allocation log; set up gpumem "
                         "with log_directory=...")
    with tempfile.TemporaryDirectory(prefix="gpumem-dask-") as directory:
        paths = {}
        for n, (address, text) in enumerate(sorted(collected.items())):
            paths[address] = os.path.join(directory, f"worker{n}.csv")
            with open(paths[address], "w") as f:
                f.write(text)
        return plot_worker_logs(paths, output, title)
