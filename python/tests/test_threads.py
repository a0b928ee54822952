"""gpumem's Python API from several threads at once (host backend)."""

import os
import subprocess
import sys

import pytest

# Python threads allocate, free and read statistics while another thread closes the contexts or
# replaces the manager (each of those releases the GIL while it waits for the device). Run in a
# child process: a context destroyed under an allocating thread crashed the interpreter.
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
