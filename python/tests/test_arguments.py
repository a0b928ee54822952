"""Bad arguments to gpumem's public functions: each is a typed exception that names the value,
never a crash, a silent no-op or a message about something else (host backend)."""

import os
import pathlib
import subprocess
import sys

import pytest

import gpumem
import gpumem.ipc


@pytest.mark.parametrize("function", [gpumem.memalloc, gpumem.allocate, gpumem.memhostalloc])
def test_sizes_out_of_range_are_invalid_arguments_naming_the_size(function):
    for bad in (-1, -(1 << 70), 1 << 64, 1 << 100):
        with pytest.raises(gpumem.InvalidArgumentError, match=str(bad)):
            function(bad)
    with pytest.raises(gpumem.OutOfMemoryError):
        function((1 << 64) - 1)  # a size_t: the allocator refuses it


@pytest.mark.parametrize("function", [gpumem.memalloc, gpumem.allocate, gpumem.memhostalloc])
def test_sizes_of_the_wrong_type_are_type_errors_naming_the_type(function):
    for bad, name in ((None, "NoneType"), (1.5, "float"), ("10", "str"), (b"1", "bytes")):
        with pytest.raises(TypeError, match=name):
            function(bad)


def test_integral_sizes_of_other_types_are_taken():
    np = pytest.importorskip("numpy")
    a = gpumem.allocate(np.uint64(4096), stream=np.int32(0), device=np.int64(0))
    assert a.size == 4096


def test_streams_and_devices_out_of_range_name_the_value():
    for bad in (-1, 1 << 64):
        with pytest.raises(gpumem.InvalidArgumentError, match=str(bad)):
            gpumem.allocate(16, stream=bad)
        with pytest.raises(gpumem.InvalidArgumentError, match=str(bad)):
            gpumem.release_stream(bad)
    for bad in (1 << 31, -(1 << 40), gpumem.device_count()):
        with pytest.raises(gpumem.InvalidArgumentError, match=str(bad)):
            gpumem.statistics(bad)
    with pytest.raises(TypeError, match="str"):
        gpumem.statistics("0")


def test_set_memory_manager_for_a_device_that_does_not_exist_is_refused():
    # It used to be kept for a device no context would ever have: a silent no-op.
    for bad in (gpumem.device_count(), 99, -1):
        with pytest.raises(gpumem.InvalidArgumentError, match=f"device {bad} does not exist"):
            gpumem.set_memory_manager("pool", bad)
        with pytest.raises(gpumem.InvalidArgumentError, match=f"device {bad} does not exist"):
            gpumem.close(bad)
        with pytest.raises(gpumem.InvalidArgumentError, match=f"device {bad} does not exist"):
            gpumem.close_for_device_reset(bad)
    assert gpumem.manager_name(0) != "pool" or gpumem.statistics(0).total_allocations == 0


def test_an_unknown_or_empty_manager_name_is_refused_naming_the_call():
    # The message used to name GPUMEM_MEMORY_MANAGER=nope, a variable nobody set, and "" was
    # taken silently as "default".
    with pytest.raises(gpumem.InvalidArgumentError) as caught:
        gpumem.set_memory_manager("nope")
    assert "set_memory_manager('nope'): unknown memory manager" in str(caught.value)
    assert "GPUMEM_MEMORY_MANAGER" not in str(caught.value)
    with pytest.raises(gpumem.InvalidArgumentError, match="name is empty"):
        gpumem.set_memory_manager("")


def test_a_bad_environment_choice_does_not_block_an_explicit_one():
    # The environment was resolved first, so its error failed every set_memory_manager call; it
    # belongs to the devices left to the environment only.
    code = ("import gpumem\n"
            "gpumem.set_memory_manager('pool', 0)\n"
            "a = gpumem.allocate(64, device=0)\n"
            "print(gpumem.manager_name(0))\n"
            "gpumem.reset_memory_managers()\n"
            "try:\n"
            "    gpumem.allocate(64, device=0)\n"
            "except gpumem.InvalidArgumentError as e:\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, GPUMEM_MEMORY_MANAGER="nope")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "pool"
    assert lines[1].startswith("refused: GPUMEM_MEMORY_MANAGER=nope: unknown memory manager")


def test_pool_options_for_a_manager_without_a_pool_are_refused():
    # They were dropped without a word (managers.hpp promised an error).
    for name in ("default", "host_only", "async"):
        with pytest.raises(gpumem.InvalidArgumentError, match="chunk_size"):
            gpumem.set_memory_manager(name, chunk_size=1 << 20)
    gpumem.set_memory_manager("pool", chunk_size=1 << 20, expandable=False)
    assert gpumem.manager_name() == "pool"
    with pytest.raises(gpumem.InvalidArgumentError, match="chunk_size"):
        gpumem.replay_log("unused.csv", "cuda", chunk_size=1 << 20)


def test_pool_options_of_the_wrong_type_name_the_option():
    with pytest.raises(TypeError, match="expandable"):
        gpumem.set_memory_manager("pool", expandable="yes")
    with pytest.raises(TypeError, match="expandable"):
        gpumem.set_memory_manager("pool", expandable=2)
    with pytest.raises(gpumem.InvalidArgumentError, match="chunk_size"):
        gpumem.set_memory_manager("pool", chunk_size=-1)
    with pytest.raises(TypeError, match="name"):
        gpumem.set_memory_manager(None)
    with pytest.raises(TypeError, match="wait_across_stream"):
        gpumem.replay_log("unused.csv", wait_across_stream=True)


def test_pool_options_of_none_are_the_defaults_for_every_target(tmp_path):
    # None is the pool's default, as set_memory_manager takes it: replay_log(target='cuda',
    # maximum_size=None) was refused as pool options given for 'cuda'.
    log = tmp_path / "run.csv"
    gpumem.set_memory_manager("pool", 0, log=log, maximum_size=None)
    gpumem.allocate(4096).free()
    gpumem.reset_memory_managers()
    assert gpumem.replay_log(log, "cuda", maximum_size=None)["allocations"] == 1


def test_replay_log_names_a_bad_target_and_a_directory(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("Action,Pointer,Size\nallocate,0xZZ,5\n")
    # The target is checked first, whatever the log holds.
    with pytest.raises(gpumem.InvalidArgumentError, match="target must be 'pool' or 'cuda'"):
        gpumem.replay_log(bad, "bogus")
    with pytest.raises(gpumem.InvalidArgumentError, match="is a directory"):
        gpumem.replay_log(tmp_path)
    with pytest.raises(gpumem.InvalidArgumentError, match="bad.csv"):
        gpumem.replay_log(bad)


def test_pool_defaults_come_from_cpp():
    # One source, C++'s pool_options{}: the package's defaults and set_memory_manager's docstring.
    defaults = gpumem._gpumem.pool_defaults()
    assert defaults["chunk_size"] == 32 << 20 and defaults["maximum_size"] is None
    assert gpumem._POOL_DEFAULTS == defaults
    assert "chunk_size 32 MiB" in gpumem.set_memory_manager.__doc__
    assert "max_cached_size 256 KiB" in gpumem.set_memory_manager.__doc__


def test_paths_may_be_path_like(tmp_path):
    log = tmp_path / "run.csv"
    gpumem.set_memory_manager("pool", 0, log=log)
    gpumem.allocate(4096).free()
    gpumem.reset_memory_managers()
    assert gpumem.replay_log(pathlib.Path(log))["allocations"] == 1


def test_an_error_quoting_bytes_that_are_not_utf8_keeps_its_type(tmp_path):
    # A binary file as a log: the parser's message quotes its line. The message could not be
    # decoded, and the error became a bare RuntimeError about UnicodeDecodeError.
    log = tmp_path / "binary.csv"
    log.write_bytes(b"Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,\xff\xfe,16,0\n")
    with pytest.raises(gpumem.InvalidArgumentError, match=r"bad pointer '\\xff\\xfe'"):
        gpumem.replay_log(str(log))


def test_ipc_open_takes_only_bytes():
    # bytes(handle) made an int into that many zero bytes (10**12: a terabyte) before parsing.
    for bad in (100, 10**12, "gpumemh1", None):
        with pytest.raises(TypeError, match=type(bad).__name__):
            gpumem.ipc.open(bad)
    with pytest.raises(gpumem.InvalidArgumentError):
        gpumem.ipc.open(bytearray(b"garbage"))


def test_exporting_an_allocation_without_memory_says_so():
    gpumem.set_memory_manager("pool", 0)
    empty = gpumem.allocate(0)
    freed = gpumem.allocate(4096)
    freed.free()
    for a in (empty, freed):
        with pytest.raises(gpumem.InvalidArgumentError, match="no memory to export"):
            gpumem.get_ipc_handle(a)
        with pytest.raises(gpumem.InvalidArgumentError, match="no memory to export"):
            gpumem.ipc.export(a)
    with pytest.raises(TypeError, match="int"):
        gpumem.get_ipc_handle(1234)


def test_foreign_cpp_error_with_bytes_that_are_not_utf8_stays_a_runtime_error():
    # The C entry points' error path (set_python_error) for a C++ exception that is not gpumem's.
    with pytest.raises(RuntimeError, match=r"bad \\xff byte") as caught:
        gpumem._gpumem._raise_runtime_error(b"bad \xff byte")
    assert type(caught.value) is RuntimeError
