"""Bad arguments to gpumem's public functions: each is a typed exception that names the value,
never a crash, a silent no-op or a message about something else (host backend)."""

import pytest

import gpumem


def test_an_error_quoting_bytes_that_are_not_utf8_keeps_its_type(tmp_path):
    # A binary file as a log: the parser's message quotes its line. The message could not be
    # decoded, and the error became a bare RuntimeError about UnicodeDecodeError.
    log = tmp_path / "binary.csv"
    log.write_bytes(b"Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,\xff\xfe,16,0\n")
    with pytest.raises(gpumem.InvalidArgumentError, match=r"bad pointer '\\xff\\xfe'"):
        gpumem.replay_log(str(log))
