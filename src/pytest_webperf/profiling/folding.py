"""The samplers' outputs as folded stacks (pure): ``perf script``'s samples, those of
the measured window only, their perf-map frames named alike for A and B, and the files
perf could not name; py-spy's raw output without pids and line numbers.

perf records from before the measured phase (it takes 1-2 s to start on a VM: it reads
``/proc/kallsyms`` several times before it enables its events; a recording started at
the window's start missed most of a 3 s window), with ``-k CLOCK_MONOTONIC`` so each
sample's time compares with the window the measurement marked (``time.monotonic``):
only the samples inside it are folded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pytest_webperf.profiling import frames, perfmap
from pytest_webperf.profiling.stacks import fold, parse_folded


@dataclass(frozen=True)
class Window:
    """The measured phase on CLOCK_MONOTONIC (seconds); ``end`` None: still open."""

    start: float
    end: float | None = None

    def holds(self, time: float) -> bool:
        return self.start <= time and (self.end is None or time <= self.end)


@dataclass(frozen=True)
class Folded:
    """perf script's samples in the window, folded, with what the folding saw."""

    stacks: dict[str, int]
    period_s: float | None  # mean sample period (None: no sample)
    first_s: float | None  # the first sample's time in the window (None: none, or no times)
    outside: int  # samples outside the window (before it started, after it ended)


# --- perf script, folded ------------------------------------------------------------------

_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


def perf_frame(sym: str, dso: str) -> str | None:
    """``sha256_block_data_order (libcrypto.so.3)``; kernel frames ``(kernel)``; a
    frame of a perf map named alike on both sides (``perfmap.map_frame``); a frame with
    neither a symbol nor a file is None (unwinding garbage without frame pointers)."""
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.strip())
    where = "kernel" if dso.startswith("[kernel") else os.path.basename(dso)
    if perfmap.MAP_DSO.match(where):
        return perfmap.map_frame(sym)
    if sym in ("", "[unknown]") and where in ("", "[unknown]", "unknown"):
        return None
    return f"{sym or '[unknown]'} ({where or '?'})"


def fold_perf_script(text: str) -> tuple[dict[str, int], float | None]:
    """``perf script -F pid,period,ip,sym,dso`` output as folded stacks (root first),
    and the mean sample period in seconds (None if no sample)."""
    folded = fold_window(text, None)
    return folded.stacks, folded.period_s


_TIME = re.compile(r"^(\d+\.\d+):?$")


def fold_window(text: str, window: Window | None) -> Folded:
    """``perf script -F pid,time,period,ip,sym,dso`` output (``time`` optional) as
    folded stacks (root first), only the samples in ``window`` when it is given."""
    stacks: list[list[str]] = []
    periods: list[int] = []
    found: list[str] | None = None
    first: float | None = None
    outside = 0
    keep = True
    for line in [*text.splitlines(), ""]:
        if line.startswith("\t") and found is not None:
            match = _FRAME.match(line)
            frame = perf_frame(match["sym"], match["dso"]) if match else None
            if frame is not None:
                found.append(frame)
            continue
        if found is not None:  # a sample ends at a blank line or at the next header
            if keep:
                stacks.append(held_frames(found[::-1]) or ["[unknown] (?)"])
            found = None
        fields = line.split()
        if not fields:
            continue
        times = [float(m[1]) for f in fields if (m := _TIME.match(f))]  # pid time: period
        keep = window is None or not times or window.holds(times[0])
        outside += not keep
        if keep and times and (first is None or times[0] < first):
            first = times[0]
        if keep and fields[-1].isdigit():
            periods.append(int(fields[-1]))
        found = []
    period = sum(periods) / len(periods) / 1e9 if periods else None
    return Folded(fold(stacks), period, first, outside)


_UNKNOWN = re.compile(r"^\[unknown\] \((?P<obj>[^()]*)\)$")


def held_frames(stack: list[str]) -> list[str]:
    """A stack (root first) with each frame perf could not name (``[unknown]
    (libz.so.1.2.13)``, ``[unknown] (jit)``) shown under its nearest named caller, as
    counted profiles show it (``frames.held``): one frame per object under one caller,
    however deep; alone only where no caller is named."""
    shown: list[str] = []
    holder: str | None = None
    for frame in stack:
        match = _UNKNOWN.match(frame)
        if match is None:
            holder = frame
            shown.append(frame)
            continue
        held = frames.held(holder, match["obj"]) if holder else frame
        if not shown or shown[-1] != held:
            shown.append(held)
    return shown


def unnamed_libraries(text: str) -> dict[str, int]:
    """Per file (as the process maps it), the samples whose leaf perf could not name
    in it: libraries and binaries without symbols (not the kernel, not a perf map)."""
    found: dict[str, int] = {}
    leaf = True
    for line in text.splitlines():
        if not line.startswith("\t"):
            leaf = True
            continue
        if not leaf:
            continue
        leaf = False
        match = _FRAME.match(line)
        if match is None or match["sym"].strip() not in ("", "[unknown]"):
            continue
        dso = match["dso"]
        if dso.startswith("/") and not perfmap.MAP_DSO.match(os.path.basename(dso)):
            found[dso] = found.get(dso, 0) + 1
    return found


_PROCESS_FRAME = re.compile(r'^process \d+:".*?"$|^process \d+$')
_LINE = re.compile(r" \(([^()]*?):\d+\)$")


def fold_py_spy(text: str) -> dict[str, int]:
    """py-spy's raw output without its process frames (a pid differs from A to B) and
    without line numbers (a function is one function whichever line was running, and
    whatever lines the change added above it)."""
    folded: dict[str, int] = {}
    for stack, count in parse_folded(text).items():
        kept = [_LINE.sub(r" (\1)", f) for f in stack.split(";") if not _PROCESS_FRAME.match(f)]
        if kept:
            key = ";".join(kept)
            folded[key] = folded.get(key, 0) + count
    return folded
