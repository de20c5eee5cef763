"""How fast to sample, so each side of a measurement gets the samples the diff needs
(pure, but for reading the kernel's limit).

A sampler counts CPU time (perf's ``cpu-clock``: each thread's own; py-spy ``--gil``:
the time a thread holds the GIL), so a side's samples are ``rate x CPU-seconds``:
``rate x cores used x duration x repetitions``. The diff (``profiling/diff.py``)
resolves a 3x change of a function at 1.5 % of the CPU with ~2,000 samples per side
(simulated, 3 pairs); at a fixed 99 Hz a server using 18 % of a core for 3 pairs of 3 s
gets ~160, too few for any function. Real profiles vary more than a multinomial
(py-spy's came in bursts: dispersion 5-6), so once two repetitions have measured the
dispersion the target is ``TARGET_SAMPLES x dispersion`` (2,000 *effective* samples).

Rates come from a ladder off the beat of the 100 / 250 / 1000 Hz timers that drive
periodic work in servers and kernels (a sampler in step with them sees the same phase
of the work every time): 99, 199, 499, 997, 1999 (997 and 1999 are prime). Caps:
perf's is the kernel's ``perf_event_max_sample_rate`` (the kernel lowers it by itself
when sampling interrupts take too long: read at each plan) and never above 1999 Hz
(measured on a 2-core VM: each sample cost the target ~150 µs of CPU, +18 % CPU per
request at 1999 Hz, +31 % at 4999); py-spy's is 997 Hz (its own CPU is ~0.5 ms per
sample: half a core at 997 Hz, on the machine the target shares).

The first repetition is planned as if the target used ``FIRST_GUESS_CORES`` of a core
(nothing is measured yet); each later one from the cores the repetitions so far used,
for the samples still missing over the repetitions still to come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

LADDER = (99, 199, 499, 997, 1999)
TARGET_SAMPLES = 2000  # per side, all repetitions together
PERF_CAP = 1999  # measured: +18 % CPU per request of a C server at 1999 Hz, +31 % at 4999
PY_SPY_CAP = 997  # measured: py-spy spends ~0.5 ms of CPU per sample, half a core at 997 Hz
FIRST_GUESS_CORES = 0.25  # before anything is measured: a lightly loaded server
TOOLS = ("perf", "py-spy")
MAX_RATE_FILE = Path("/proc/sys/kernel/perf_event_max_sample_rate")


@dataclass(frozen=True)
class Plan:
    """A tool's rate, the samples a side can expect with it over the whole run, and
    (when the cap binds) the duration per repetition that would reach the target."""

    tool: str
    rate: int
    expected: float
    needed_duration_s: float | None


def perf_cap(path: Path = MAX_RATE_FILE) -> int:
    """perf's highest rate here: the kernel's limit, never above ``PERF_CAP``."""
    try:
        kernel = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        kernel = 1000  # the kernel's own default before any throttling
    return min(PERF_CAP, kernel)


def cap_of(tool: str) -> int:
    if tool not in TOOLS:
        raise ValueError(f"unknown sampler {tool!r}")
    return perf_cap() if tool == "perf" else PY_SPY_CAP


def plan(
    tool: str,
    cores: float,
    duration_s: float,
    repetitions: int,
    *,
    have: int = 0,
    done: int = 0,
    target: int = TARGET_SAMPLES,
    cap: int | None = None,
    dispersion: float = 1.0,
) -> Plan:
    """The lowest ladder rate that gives each side ``target`` samples (times the
    ``dispersion`` the repetitions so far measured), given ``have`` samples from the
    ``done`` repetitions already run, for the ``repetitions - done`` to come at
    ``cores`` (the target's CPU in cores: 1.0 is one core busy); capped for the tool."""
    limit = cap if cap is not None else cap_of(tool)
    want = round(target * max(1.0, dispersion))
    left = max(1, repetitions - done)
    cpu_seconds = max(cores, 0.0) * duration_s * left
    allowed = [r for r in LADDER if r <= limit] or [LADDER[0]]
    need = max(0, want - have) / cpu_seconds if cpu_seconds > 0 else math.inf
    rate = next((r for r in allowed if r >= need), allowed[-1])
    expected = have + rate * cpu_seconds
    short = expected < want * 0.95 and cores > 0 and repetitions > 0
    needed = want / (rate * cores * repetitions) if short else None
    return Plan(tool, rate, expected, needed)


def first_rates(duration_s: float, repetitions: int) -> dict[str, int]:
    """Each tool's rate for the first repetition: nothing is measured yet."""
    return {tool: plan(tool, FIRST_GUESS_CORES, duration_s, repetitions).rate for tool in TOOLS}


def short_note(tool: str, rate: int, samples: int, cores: float, repetitions: int) -> str | None:
    """What to change when a side got fewer than ``TARGET_SAMPLES`` at the tool's cap."""
    if samples >= TARGET_SAMPLES * 0.95 or rate < cap_of(tool) or cores <= 0:
        return None
    seconds = math.ceil(TARGET_SAMPLES / (rate * cores * max(1, repetitions)))
    return (
        f"{samples:,} samples on the smaller side at {tool}'s cap of {rate} Hz (the target "
        f"used {cores:.2f} of a core): --webperf-duration={seconds}s or more repetitions "
        f"would give {TARGET_SAMPLES:,}"
    )
