"""The seam between a running measurement and whoever shows its progress.

The measurement loop (``measurement/loop.py``) calls ``update`` about once a second and
``done`` when a repetition ends; the pytest glue renders it (a live line on a
terminal, a plain line per repetition in CI). Plain Python: no pytest here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Tick:
    """Where one measurement stands right now."""

    nodeid: str
    name: str  # the measurement's name, e.g. "GET /hello"
    side: str  # "" in a stored-baseline run; "A" (base) or "B" (change) in an A/B run
    repetition: int  # 1-based
    repetitions: int  # planned so far (an A/B run may add pairs)
    phase: str  # "warm-up" or "measuring"
    elapsed_s: float  # in this repetition's current phase
    total_s: float  # the phase's planned length
    rps: float  # the last second's rate
    errors: int  # failed requests so far in this repetition's measured phase
    # the last second's own figures (live metrics, ``report/otlp.py``): its requests and failed
    # ones, latency percentiles (None: none completed), users, and the server's CPU
    # (100 = one core) and memory summed over its parts at the latest sample
    requests: int = 0
    new_errors: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    users: int | None = None
    server_cpu_percent: float | None = None
    server_rss_mb: float | None = None


@dataclass(frozen=True)
class RepetitionDone:
    """One repetition finished: what a CI log line says."""

    nodeid: str
    name: str
    side: str
    repetition: int
    repetitions: int
    requests: int
    rps: float
    errors: int
    p95_ms: float | None
    # a counted repetition's instructions per request: its rate and latency were taken
    # under Valgrind, so the line says what it counted instead
    instructions_per_req: float | None = None


class Progress(Protocol):
    def update(self, tick: Tick) -> None: ...

    def done(self, repetition: RepetitionDone) -> None: ...


class NoProgress:
    """Shows nothing (unit tests, library use)."""

    def update(self, tick: Tick) -> None:
        pass

    def done(self, repetition: RepetitionDone) -> None:
        pass
