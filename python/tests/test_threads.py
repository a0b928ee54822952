"""gpumem's Python API from several threads at once (host backend)."""

import os
import subprocess
import sys

import pytest

# Python threads allocate, free, flush and read statistics while another thread closes the contexts
# or replaces the manager (each of those releases the GIL while it waits for the device). Run in a
# child process: a context destroyed under an allocating thread crashed the interpreter, and so did
# a flush() (which releases the GIL first) that found a change in progress, on CPython before 3.12:
# it took the GIL for its own and "released" it again under the thread that held it.
_CONTEXTS_CHANGE_UNDER_ALLOCATING_THREADS = r"""
import sys, threading, time
import gpumem

manager, change = sys.argv[1], sys.argv[2]
gpumem.set_memory_manager(manager)
stop = threading.Event()
errors = []

def changer():
    while not stop.is_set():
        if change == "close":
            gpumem.close()
        elif change == "close_device":
            gpumem.close(0)
        elif change == "reset_device":
            gpumem.close_for_device_reset(0)
        else:
            gpumem.set_memory_manager(manager)

def worker(i):
    try:
        kept = []
        while not stop.is_set():
            kept.append(gpumem.allocate(1000 + i) if i % 2 else gpumem.memalloc(1000 + i))
            gpumem.statistics()
            gpumem.manager_name()
            if i % 3 == 0:
                gpumem.flush()
            if len(kept) > 50:
                kept.clear()
    except Exception as e:
        errors.append(repr(e))

threads = [threading.Thread(target=changer)]
threads += [threading.Thread(target=worker, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
time.sleep(float(sys.argv[3]))
stop.set()
for t in threads:
    t.join()
assert not errors, errors[:3]
gpumem.flush()
s = gpumem.statistics()
assert s.bytes_in_use == 0 and s.allocations == 0, s
print("ok")
"""


@pytest.mark.parametrize("manager", ["pool", "default"])
@pytest.mark.parametrize("change", ["close", "close_device", "reset_device", "set_memory_manager"])
def test_contexts_closed_or_replaced_while_threads_allocate(manager, change):
    env = dict(os.environ, GPUMEM_DEVICE="host")
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CONTEXTS_CHANGE_UNDER_ALLOCATING_THREADS,
                              manager, change, "0.7"],
                             capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr)
        assert "gpumem [error]" not in out.stderr, out.stderr


# A daemon thread inside a call that releases the GIL when the interpreter exits: Python ends such
# a thread when it asks for the GIL back (pthread_exit before Python 3.14), which aborted the
# process ("terminate called without an active exception") when the unwinding reached the
# extension's frames. Objects that daemon threads still hold at exit were reported as leaks.
_DAEMON_THREAD_AT_EXIT = r"""
import sys, threading, time
import gpumem

call = sys.argv[1]
gpumem.set_memory_manager("pool")

def spin():
    kept = []
    while True:
        kept.append(gpumem.allocate(123))
        if len(kept) > 20:
            kept.clear()
        getattr(gpumem, call)()

for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.2)
print("exiting")
"""


@pytest.mark.parametrize("call", ["flush", "reset", "close", "reset_memory_managers"])
def test_daemon_threads_in_gpumem_calls_at_exit(call):
    env = dict(os.environ, GPUMEM_DEVICE="host")
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", _DAEMON_THREAD_AT_EXIT, call],
                             capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout.strip() == "exiting"
        assert out.stderr == "", out.stderr


# Daemon threads allocate (their context_use waits, with the GIL released, while another daemon
# thread closes the contexts) when the interpreter exits, and an atexit handler registered before
# `import gpumem` (so run after gpumem's own) closes gpumem. A thread parked at exit while it held
# the contexts' lock shared made that close() wait forever.
_CLOSE_AT_EXIT_AFTER_PARKED_THREADS = r"""
import atexit, sys, threading, time

def close_gpumem():
    gpumem.close()
    print("closed", flush=True)

atexit.register(close_gpumem)
import gpumem

gpumem.set_memory_manager("pool")

def allocate():
    kept = []
    while True:
        kept.append(gpumem.allocate(123))
        if len(kept) > 20:
            kept.clear()

def close():
    while True:
        gpumem.close()

for target in [close] + [allocate] * 4:
    threading.Thread(target=target, daemon=True).start()
time.sleep(0.2)
print("exiting", flush=True)
"""


def test_close_at_exit_after_threads_parked_in_context_use():
    env = dict(os.environ, GPUMEM_DEVICE="host")
    for _ in range(5):
        try:
            out = subprocess.run([sys.executable, "-c", _CLOSE_AT_EXIT_AFTER_PARKED_THREADS],
                                 capture_output=True, text=True, env=env, timeout=20)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"the exit hung: {e.stdout!r}")
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout.split() == ["exiting", "closed"], (out.stdout, out.stderr)


# nanobind's report of gpumem objects still alive at exit stays on for a program without daemon
# threads at exit (here an Allocation whose reference is leaked on purpose): it is a real leak.
_LEAK_WITHOUT_DAEMON_THREADS = r"""
import ctypes
import gpumem

kept = gpumem.allocate(123)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(kept))
print("exiting")
"""


def test_leaks_reported_at_exit_without_daemon_threads():
    env = dict(os.environ, GPUMEM_DEVICE="host")
    out = subprocess.run([sys.executable, "-c", _LEAK_WITHOUT_DAEMON_THREADS],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "exiting", (out.returncode, out.stderr)
    assert "nanobind: leaked" in out.stderr, out.stderr


# A child forked while another thread of the parent is inside flush() (the call counted as inside a
# gil_release): the child's exit waited 30 s for the parent's call, as if that thread were its own.
# (The child runs the atexit handlers and leaves with os._exit: its copy of the host backend has
# no stream threads, so the rest of a normal exit, which closes the contexts, would wait for the
# stream the parent's flush() waits for.)
_FORK_WHILE_ANOTHER_THREAD_FLUSHES = r"""
import atexit, os, threading, time
import gpumem
from gpumem import _gpumem

gpumem.set_memory_manager("pool")
stream = _gpumem._stream_create()
memory = gpumem.memalloc(1000)
open_stream = _gpumem._stream_hold(stream)  # flush() waits for the device
del memory
flusher = threading.Thread(target=gpumem.flush)
flusher.start()
time.sleep(0.3)
assert flusher.is_alive()
pid = os.fork()
if pid == 0:
    start = time.monotonic()
    atexit._run_exitfuncs()
    print("child's atexit took", time.monotonic() - start, flush=True)
    os._exit(0)
open_stream()
flusher.join()
_, status = os.waitpid(pid, 0)
print("child exited", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_another_thread_flushes():
    env = dict(os.environ, GPUMEM_DEVICE="host")
    out = subprocess.run([sys.executable, "-c", _FORK_WHILE_ANOTHER_THREAD_FLUSHES],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr)
    took = [line.split() for line in out.stdout.splitlines() if line.startswith("child's")]
    assert took and float(took[0][-1]) < 5, out.stdout
    assert "child exited 0" in out.stdout, out.stdout
