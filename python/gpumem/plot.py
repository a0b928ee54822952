"""Draws a gpumem CSV allocation log as a memory timeline (what PyTorch's memory_viz shows).

    python -m gpumem.plot LOG.csv -o timeline.png      # or timeline.html
    python -m gpumem.plot LOG.csv -o t.png --held none --top 5

The log is the one gpumem writes (gpumem.set_memory_manager("pool", log="LOG.csv"), or
mr/logging_adaptor in C++; RMM's logs have the same format). The picture shows over time:
  * bytes in use: the sum of live allocations, from the log itself;
  * bytes held: what a pool held while serving the same events, from replaying the log against a
    fresh gpumem pool (--held replay, the default; it allocates on the current gpumem backend:
    set GPUMEM_DEVICE=host to replay on the host), or nothing (--held none);
  * the largest allocations live at the peak, labelled with their size.
HTML output is one self-contained page: the picture and a table of those allocations.
Needs matplotlib (imported only here).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import os
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence


@dataclass
class Event:
    time: float
    action: str  # "allocate", "free" or "allocate failure"
    pointer: int
    size: int
    stream: int


@dataclass
class Timeline:
    times: List[float]  # one point per allocate/free that changed the live set
    in_use: List[int]
    peak_index: int
    live_at_peak: List[tuple]  # (size, pointer, time allocated), largest first


def read_log(path: str) -> List[Event]:
    """The events of a CSV log (columns Action, Pointer, Size required; Time, Stream optional),
    read by the replay's own parser (gpumem.replay_log reads the same events)."""
    from . import _gpumem
    from ._errors import InvalidArgumentError

    try:
        return [Event(*row) for row in _gpumem.parse_log(os.fspath(path))]
    except InvalidArgumentError as error:
        raise ValueError(str(error)) from None


def timeline(events: Sequence[Event], top: int = 8) -> Timeline:
    """Bytes in use after every event, and the largest allocations live at the peak."""
    live: dict = {}
    times: List[float] = []
    in_use: List[int] = []
    now = 0
    peak, peak_index, live_at_peak = -1, 0, []
    t0 = next((e.time for e in events if e.time), 0.0)
    for e in events:
        if e.action == "allocate":
            live[e.pointer] = (e.size, e.time - t0)
            now += e.size
        elif e.action == "free":
            freed = live.pop(e.pointer, None)
            if freed is None:
                continue  # a free of memory allocated before the log started
            now -= freed[0]
        else:
            continue
        times.append(e.time - t0 if e.time else float(len(times)))
        in_use.append(now)
        if now > peak:
            peak, peak_index = now, len(in_use) - 1
            live_at_peak = sorted(((s, p, t) for p, (s, t) in live.items()), reverse=True)[:top]
    return Timeline(times, in_use, peak_index, live_at_peak)


def replay_held(path: str, replayed: int) -> Optional[List[int]]:
    """The held bytes of a fresh pool after each replayed event, or None when they cannot be
    aligned with the log's events."""
    from . import replay_log

    held = replay_log(path, "pool")["held"]
    return list(held) if len(held) == replayed else None


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render(t: Timeline, held: Optional[List[int]], title: str, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=100)
    x = t.times
    ax.fill_between(x, t.in_use, step="post", alpha=0.35, color="tab:blue", label="in use")
    ax.step(x, t.in_use, where="post", color="tab:blue", linewidth=1)
    if held is not None:
        ax.step(x, held, where="post", color="tab:red", linewidth=1.5, label="held (pool replay)")
    if t.in_use:
        px, py = x[t.peak_index], t.in_use[t.peak_index]
        ax.axvline(px, color="grey", linestyle=":", linewidth=1)
        # The largest live allocations at the peak, stacked from 0 as bands of the peak's bar;
        # bands too thin to read keep their line but lose the label.
        stacked = 0
        right = px < (x[-1] if x else 0) * 0.75
        for size, pointer, _born in t.live_at_peak:
            ax.plot([px, px], [stacked, stacked + size], color="tab:purple", linewidth=4,
                    solid_capstyle="butt")
            if size >= 0.04 * py:
                ax.annotate(f"{_human(size)} @0x{pointer:x}", xy=(px, stacked + size / 2),
                            xytext=(10 if right else -10, 0), textcoords="offset points",
                            fontsize=7, va="center", ha="left" if right else "right",
                            bbox=dict(boxstyle="round,pad=0.2", fc="white", alpha=0.8, lw=0))
            stacked += size
        ax.set_title(f"{title}: peak {_human(py)} in use"
                     + (f", {_human(max(held))} held" if held else ""))
    ax.set_xlabel("seconds since the first event" if any(x) else "event")
    ax.set_ylabel("bytes")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: _human(v)))
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if output.endswith(".html"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        rows = "".join(f"<tr><td>{_human(s)}</td><td>{s}</td><td>0x{p:x}</td><td>{b:.6f}</td></tr>"
                       for s, p, b in t.live_at_peak)
        title = html.escape(title)
        with open(output, "w") as f:
            f.write(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
                    f"</head><body><h1>{title}</h1><img src='data:image/png;base64,{image}'>"
                    "<h2>Largest allocations live at the peak</h2><table border='1'>"
                    "<tr><th>size</th><th>bytes</th><th>pointer</th><th>allocated at (s)</th>"
                    f"</tr>{rows}</table></body></html>")
    else:
        fig.savefig(output)
    plt.close(fig)


def _count(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpumem.plot", description=__doc__.split("\n")[0])
    parser.add_argument("log", help="CSV allocation log")
    parser.add_argument("-o", "--output", default="timeline.png", help=".png (or any matplotlib "
                        "format) or .html")
    parser.add_argument("--held", choices=("replay", "none"), default="replay",
                        help="draw the bytes a fresh pool holds when replaying the log")
    parser.add_argument("--top", type=_count, default=8,
                        help="largest live allocations to label")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        events = read_log(args.log)
    except (OSError, ValueError) as error:
        print(f"gpumem.plot: {error}", file=sys.stderr)
        return 2
    t = timeline(events, args.top)
    try:
        held = replay_held(args.log, len(t.in_use)) if args.held == "replay" else None
    except (OSError, ValueError, MemoryError) as error:  # gpumem's errors are among these
        print(f"gpumem.plot: replaying {args.log}: {error}", file=sys.stderr)
        return 2
    if args.held == "replay" and held is None:
        print("gpumem.plot: the replay's events do not line up with the log's; held not drawn",
              file=sys.stderr)
    render(t, held, args.title or args.log, args.output)
    print(f"gpumem.plot: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
