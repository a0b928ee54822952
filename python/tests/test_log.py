"""The CSV allocation log: written by the pool manager, replayed, drawn by gpumem.plot."""

import csv

import pytest

import gpumem


def write_log(path):
    gpumem.set_memory_manager("pool", 0, log=str(path))
    kept = []
    for i in range(1, 40):
        a = gpumem.allocate(i * 4096, stream=0, device=0)
        if i % 3 == 0:
            kept.append(a)
    big = gpumem.allocate(8 << 20, device=0)
    del big, kept
    gpumem.close(0)  # flushes and closes the log


def test_pool_writes_a_csv_log(tmp_path):
    path = tmp_path / "log.csv"
    write_log(path)
    rows = list(csv.DictReader(open(path)))
    assert rows[0].keys() >= {"Thread", "Time", "Action", "Pointer", "Size", "Stream"}
    allocations = [r for r in rows if r["Action"] == "allocate"]
    frees = [r for r in rows if r["Action"] == "free"]
    assert len(allocations) == 40
    assert len(frees) == 40
    assert int(allocations[-1]["Size"]) == 8 << 20


def test_replay_reports_peaks_and_held_bytes(tmp_path):
    path = tmp_path / "log.csv"
    write_log(path)
    result = gpumem.replay_log(str(path), "pool")
    assert result["allocations"] == 40 and result["frees"] == 40
    assert result["peak_live_bytes"] >= 8 << 20
    assert result["peak_held_bytes"] >= result["peak_live_bytes"]
    assert len(result["held"]) == 80, "one held sample after each allocation and free"
    assert result["fragmentation"] >= 1.0
    # The pool options reach the replayed pool (one stream here: nothing to wait for).
    waiting = gpumem.replay_log(str(path), "pool", wait_across_streams=True)
    assert waiting["allocations"] == 40 and waiting["peak_live_bytes"] == result["peak_live_bytes"]
    with pytest.raises(TypeError):
        gpumem.replay_log(str(path), "pool", wait_across_stream=True)
    with pytest.raises(ValueError):
        gpumem.replay_log(str(path), "bogus")
    with pytest.raises(ValueError):
        gpumem.replay_log(str(tmp_path / "missing.csv"))


def test_plot_renders_png_and_html(tmp_path):
    pytest.importorskip("matplotlib")
    from gpumem import plot

    path = tmp_path / "log.csv"
    write_log(path)
    t = plot.timeline(plot.read_log(str(path)))
    assert max(t.in_use) == t.in_use[t.peak_index]
    assert t.live_at_peak[0][0] == 8 << 20, "the largest live allocation at the peak comes first"
    png = tmp_path / "timeline.png"
    assert plot.main([str(path), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = tmp_path / "timeline.html"
    assert plot.main([str(path), "-o", str(html), "--held", "none"]) == 0
    text = html.read_text()
    assert "data:image/png;base64," in text and "8.0 MiB" in text


def test_plot_rejects_a_file_that_is_not_a_log(tmp_path, capsys):
    from gpumem import plot

    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert plot.main([str(bad), "-o", str(tmp_path / "x.png")]) == 2
    assert "the header 'a,b' lacks one of the columns" in capsys.readouterr().err


HEADER = "Thread,Time,Action,Pointer,Size,Stream\n"


@pytest.mark.parametrize("row, complaint", [
    ("1,0.1,allocate,0x1000,-5,0x0", "bad size '-5'"),
    ("1,0.1,allocate,0x1000,+5,0x0", "bad size '+5'"),
    ("1,0.1,allocate,0x1000,99999999999999999999999,0x0", "bad size"),
    ("1,nan,allocate,0x1000,5,0x0", "bad time 'nan'"),
    ("1,inf,allocate,0x1000,5,0x0", "bad time 'inf'"),
    ("1,0.1,allocate,0x1000,5", "expected at least 6 fields, got 5"),
    ("1,0.1,allocate,0x10000000000000000,5,0x0", "bad pointer"),
    ("1,0.1,allocate,0x1000,5,zz", "bad stream 'zz'"),
])
def test_plot_refuses_what_the_replay_refuses(tmp_path, capsys, row, complaint):
    # gpumem.plot read these (a negative size drew a negative timeline), then the replay's parser
    # refused them with a traceback (exit status 1).
    from gpumem import plot

    log = tmp_path / "bad.csv"
    log.write_text(HEADER + row + "\n")
    for held in ("replay", "none"):
        assert plot.main([str(log), "-o", str(tmp_path / "x.png"), "--held", held]) == 2
        err = capsys.readouterr().err
        assert complaint in err and "Traceback" not in err, err
    with pytest.raises(ValueError, match="line 2"):
        gpumem.replay_log(str(log))


def test_plot_reads_what_the_replay_reads(tmp_path):
    # Lower-case column names, hexadecimal pointers without 0x, null spellings, times of day,
    # blank lines: the replay takes them, and so does the plot.
    from gpumem import plot

    log = tmp_path / "variants.csv"
    log.write_text("thread,time,action,pointer,size,stream\n"
                   "1,01:02:03.5,allocate,7f00,4096,null\n\n"
                   "1,01:02:04,FREE,0x7f00,4096,(nil)\n")
    events = plot.read_log(str(log))
    assert [(e.action, e.pointer, e.size, e.stream) for e in events] == [
        ("allocate", 0x7f00, 4096, 0), ("free", 0x7f00, 4096, 0)]
    assert events[1].time - events[0].time == pytest.approx(0.5)
    assert gpumem.replay_log(str(log))["allocations"] == 1


def test_plot_refuses_a_binary_file_and_a_negative_top(tmp_path, capsys):
    from gpumem import plot

    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00binary")
    assert plot.main([str(binary), "-o", str(tmp_path / "x.png")]) == 2
    # The whole header, its NUL too (which ended the message where it was read as a C string).
    assert "the header '\\xff\\xfe\\x00binary' lacks" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        plot.main([str(binary), "--top", "-1"])


def test_plot_html_escapes_the_title(tmp_path):
    pytest.importorskip("matplotlib")
    from gpumem import plot

    log = tmp_path / "log.csv"
    log.write_text(HEADER + "1,0.1,allocate,0x1000,4096,0x0\n")
    page = tmp_path / "t.html"
    assert plot.main([str(log), "-o", str(page), "--title", "<script>x</script>"]) == 0
    assert "<script>" not in page.read_text()
