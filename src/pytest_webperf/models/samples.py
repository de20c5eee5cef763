"""One repetition's time series and latency as saved: per-interval load snapshots, resource
and generator samples, latency percentiles (frozen, each with to_dict/from_dict)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from pytest_webperf.stats.histogram import Histogram


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of ``cls`` (newer keys are ignored)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class Snapshot:
    """One interval (normally one second) of load as the generator saw it."""

    t: float  # seconds since the start of the measured phase, at the end of the interval
    elapsed: float  # length of the interval in seconds
    users: int
    requests: int  # completed requests, failed ones included
    errors: int  # failed requests: timeouts, connection errors, HTTP status >= 400
    timeouts: int
    bytes: int  # response bytes received (headers and body)
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    @property
    def rps(self) -> float:
        return self.requests / self.elapsed if self.elapsed > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Latency:
    """Latency of completed requests in milliseconds (from a microsecond histogram)."""

    mean_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    @classmethod
    def of(cls, histogram: Histogram) -> Latency:
        ms = 1000.0
        return cls(
            mean_ms=histogram.mean() / ms,
            p50_ms=histogram.percentile(50) / ms,
            p90_ms=histogram.percentile(90) / ms,
            p95_ms=histogram.percentile(95) / ms,
            p99_ms=histogram.percentile(99) / ms,
            p999_ms=histogram.percentile(99.9) / ms,
            max_ms=histogram.max() / ms,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Latency:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class ResourceSample:
    """One sample of a target's (or one part of a composite target's) resources."""

    t: float  # seconds since the start of the measured phase (negative during warm-up)
    part: str  # server name; composite targets record one sample per part per second
    cpu_percent: float  # sum over the process tree, 100 = one full core
    rss_mb: float
    processes: int
    threads: int
    fds: int | None = None
    connections: int | None = None
    cgroup_cpu_percent: float | None = None
    cgroup_memory_mb: float | None = None  # memory.current minus inactive file
    pss_mb: float | None = None  # proportional set size, tree sum (sampled every few seconds)
    uss_mb: float | None = None  # unique set size, tree sum (sampled every few seconds)
    # threads that can run at once: each process's threads, but one for a process under a
    # global interpreter lock (CPython, PyPy); None: not recorded (read ``threads``)
    usable_threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResourceSample:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class GeneratorSample:
    """The load generator's own CPU in one second (all its processes)."""

    t: float
    cpu_percent: float  # 100 = one full core
    processes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GeneratorSample:
        return cls(**_known(cls, data))
