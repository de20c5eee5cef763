"""Frozen value objects that are saved or sent, each with ``to_dict``/``from_dict``: a
repetition (``RunResult``), a verdict, a measurement. Their parts live below:
``models/samples.py`` (time series, latency), ``models/endpoints.py``, ``models/mqtt.py``,
``models/stream.py``.

``SCHEMA_VERSION`` is the version of the dict layout written by ``to_dict``;
readers of stored data (baselines, reports) check it and upgrade or refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_webperf.models.capacity import Capacity
from pytest_webperf.models.counts import Counts
from pytest_webperf.models.endpoints import (
    Counted,
    EndpointResult,
    EndpointSummary,
    endpoint_summaries,
)
from pytest_webperf.models.http2 import Http2Figures
from pytest_webperf.models.mqtt import MqttResult
from pytest_webperf.models.samples import GeneratorSample, Latency, ResourceSample, Snapshot
from pytest_webperf.models.stream import StreamResult
from pytest_webperf.models.workload import Workload
from pytest_webperf.stats.histogram import Histogram

SCHEMA_VERSION = 1

Status = Literal[
    "pass",
    "regression",  # a check failed: the test fails
    "broken",  # most requests failed, baseline or not: the test fails
    "no-baseline",
    "generator-bound",
    "unchanged",  # A/B: the target is the same at the base ref, not measured
    "undecided",  # a check could not tell a regression of its size from noise
]
FAILING: frozenset[str] = frozenset({"regression", "broken"})


@dataclass(frozen=True)
class RunResult(Counted):
    """One repetition: warm-up excluded, everything measured in the measured phase."""

    repetition: int
    concurrency: int
    duration_s: float  # measured wall time of the measured phase
    requests: int
    errors: int
    timeouts: int
    connect_errors: int
    bytes: int
    latency: Latency
    series: tuple[Snapshot, ...]
    histogram: Histogram = field(repr=False, compare=False, default_factory=Histogram)
    resources: tuple[ResourceSample, ...] = ()
    generator: tuple[GeneratorSample, ...] = ()
    error_kinds: Mapping[str, int] = field(default_factory=dict)
    # one failed response per error kind, as it came: "HTTP/1.1 500 Internal Server Error",
    # "not an HTTP/1.x status line: b'...'", "connection closed after 10 of 100 body bytes"
    error_examples: Mapping[str, str] = field(default_factory=dict)
    server_cpu_seconds: float | None = None  # cgroup CPU time of the target, all parts
    generator_bound: bool = False  # the generator, not the server, was saturated
    server_cores: float | None = None  # CPUs the target could use (its limit, else the machine)
    generator_processes: tuple[Mapping[str, Any], ...] = ()  # pid, role, cpus, cpu_s each
    # CPU other processes used on the machine during the measured phase (100 = one core):
    # what made rps and latency move without the server changing
    foreign_cpu_percent: float | None = None
    notes: tuple[str, ...] = ()
    mqtt: MqttResult | None = None  # MQTT runs only
    # paced HTTP runs only (``latency`` then counts from each request's intended start):
    # send-to-response time, and how late the generator itself sent
    service: Latency | None = None
    schedule_lag: Latency | None = None
    requests_asked: int | None = None  # a fixed request count (ab's -n); duration: time taken
    # arrival-rate runs only: the most users busy at once (summed over generator
    # processes), and how many ever took a request (the connections the pace needed)
    users_peak: int | None = None
    users_opened: int | None = None
    # a new connection per request (keepalive=False) only: TCP connect time, and the TLS
    # handshake's (https), per connection
    connect: Latency | None = None
    tls_handshake: Latency | None = None
    # which process instance of the target ran it, counting restarts (0, 1, ...): runs on
    # one instance share its bias, so the gate's unit of evidence is the instance. None:
    # not recorded (runs stored before it was), each run then counts as its own instance.
    instance: int | None = None
    # a request mix, or a user's own Locust users with several request names: each
    # endpoint's figures by name (empty for a single request shape: the run is the one)
    endpoints: Mapping[str, EndpointResult] = field(default_factory=dict)
    # the target's threads' context switches over the measured phase (None: not stamped)
    ctx_switches: int | None = None
    # a counted repetition (count=True): its counted and native windows
    counts: Counts | None = None
    # HTTP/2 only: per stream, the time to the response headers (TTFB, from the stream's
    # start) and the time request bodies waited for the server's flow-control window (the
    # bodies that did); the connections' figures (streams asked and allowed, HPACK, ...)
    ttfb: Latency | None = None
    body_stall: Latency | None = None
    http2: Http2Figures | None = None
    stream: StreamResult | None = None  # WebSocket and SSE runs only

    @property
    def ctx_switches_per_req(self) -> float | None:
        """Context switches per request: a counted repetition's native window's, else
        the measured phase's."""
        if self.counts is not None:
            return self.counts.ctx_switches_per_req
        if self.ctx_switches is None or not self.requests:
            return None
        return self.ctx_switches / self.requests

    @property
    def in_flight(self) -> int:
        """Requests in flight at most: connections x streams over HTTP/2, else users."""
        return self.concurrency * (self.http2.streams if self.http2 is not None else 1)

    @property
    def time_per_request_ms(self) -> float | None:
        """ab's "Time per request (mean)": concurrency x time taken / requests."""
        return self.concurrency * self.duration_s * 1000 / self.requests if self.requests else None

    @property
    def transfer_kb_s(self) -> float:
        """ab's "Transfer rate" (of bodies here), KB/s."""
        return self.bytes / 1024 / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def capacity_rps(self) -> float | None:
        """An estimate: requests/s the cores the target could use (``server_cores``, see
        ``repetition.usable_cores``: never more than its threads can run at once) could serve
        at this service demand (utilization law: throughput per core = 1 / CPU time per
        request), whoever was the bottleneck. Not a measured maximum."""
        demand = self.cpu_per_req_us
        if demand is None or demand <= 0 or self.server_cores is None:
            return None
        return self.server_cores * 1e6 / demand

    @property
    def cpu_per_req_us(self) -> float | None:
        """Service demand: the target's CPU time per request, in microseconds."""
        if self.server_cpu_seconds is None or not self.requests:
            return None
        return self.server_cpu_seconds * 1e6 / self.requests

    def to_dict(self) -> dict[str, Any]:
        return {
            "repetition": self.repetition,
            "instance": self.instance,
            "concurrency": self.concurrency,
            **self.counts_to_dict(),
            "timeouts": self.timeouts,
            "connect_errors": self.connect_errors,
            "server_cpu_seconds": self.server_cpu_seconds,
            "cpu_per_req_us": self.cpu_per_req_us,
            "generator_bound": self.generator_bound,
            "server_cores": self.server_cores,
            "generator_processes": [dict(g) for g in self.generator_processes],
            "foreign_cpu_percent": self.foreign_cpu_percent,
            "capacity_rps": self.capacity_rps,
            "capacity_estimate": True,  # the utilization law's, not a measured maximum
            "series": [s.to_dict() for s in self.series],
            "resources": [r.to_dict() for r in self.resources],
            "generator": [g.to_dict() for g in self.generator],
            "notes": list(self.notes),
            "ctx_switches": self.ctx_switches,
            "ctx_switches_per_req": self.ctx_switches_per_req,
            **({"counts": self.counts.to_dict()} if self.counts is not None else {}),
            "mqtt": None if self.mqtt is None else self.mqtt.to_dict(),
            **_schedule_and_count(self),
            **(
                {"endpoints": {n: e.to_dict() for n, e in self.endpoints.items()}}
                if self.endpoints
                else {}
            ),
            **({"stream": self.stream.to_dict()} if self.stream is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            repetition=int(data["repetition"]),
            concurrency=int(data["concurrency"]),
            **cls.counts_from_dict(data),
            timeouts=int(data["timeouts"]),
            connect_errors=int(data.get("connect_errors", 0)),
            series=tuple(Snapshot.from_dict(s) for s in data.get("series", ())),
            resources=tuple(ResourceSample.from_dict(r) for r in data.get("resources", ())),
            generator=tuple(GeneratorSample.from_dict(g) for g in data.get("generator", ())),
            server_cpu_seconds=data.get("server_cpu_seconds"),
            generator_bound=bool(data.get("generator_bound", False)),
            server_cores=data.get("server_cores"),
            generator_processes=tuple(dict(g) for g in data.get("generator_processes", ())),
            foreign_cpu_percent=data.get("foreign_cpu_percent"),
            notes=tuple(data.get("notes", ())),
            mqtt=MqttResult.from_dict(data["mqtt"]) if data.get("mqtt") else None,
            service=_latency_or_none(data.get("service")),
            schedule_lag=_latency_or_none(data.get("schedule_lag")),
            requests_asked=data.get("requests_asked"),
            users_peak=data.get("users_peak"),
            users_opened=data.get("users_opened"),
            connect=_latency_or_none(data.get("connect")),
            tls_handshake=_latency_or_none(data.get("tls_handshake")),
            instance=data.get("instance"),
            endpoints={
                str(n): EndpointResult.from_dict(e)
                for n, e in (data.get("endpoints") or {}).items()
            },
            ctx_switches=data.get("ctx_switches"),
            counts=Counts.from_dict(data["counts"]) if data.get("counts") else None,
            ttfb=_latency_or_none(data.get("ttfb")),
            body_stall=_latency_or_none(data.get("body_stall")),
            http2=Http2Figures.from_dict(data["http2"]) if data.get("http2") else None,
            stream=StreamResult.from_dict(data["stream"]) if data.get("stream") else None,
        )


def _latency_or_none(data: Mapping[str, Any] | None) -> Latency | None:
    return Latency.from_dict(data) if data else None


def _schedule_and_count(run: RunResult) -> dict[str, Any]:
    """A paced run's service time and send lag; an arrival-rate run's users; a fixed
    count's figures (ab's)."""
    extra: dict[str, Any] = {}
    if run.service is not None:
        extra["service"] = run.service.to_dict()
    if run.schedule_lag is not None:
        extra["schedule_lag"] = run.schedule_lag.to_dict()
    if run.users_peak is not None:
        extra.update(users_peak=run.users_peak, users_opened=run.users_opened)
    if run.connect is not None:
        extra["connect"] = run.connect.to_dict()
    if run.tls_handshake is not None:
        extra["tls_handshake"] = run.tls_handshake.to_dict()
    if run.ttfb is not None:
        extra["ttfb"] = run.ttfb.to_dict()
    if run.body_stall is not None:
        extra["body_stall"] = run.body_stall.to_dict()
    if run.http2 is not None:
        extra["http2"] = run.http2.to_dict()
        extra["in_flight"] = run.in_flight
    if run.requests_asked:
        per_all = run.duration_s * 1000 / run.requests if run.requests else None
        extra.update(requests_asked=run.requests_asked, time_taken_s=run.duration_s)
        extra.update(time_per_request_ms=run.time_per_request_ms, transfer_kb_s=run.transfer_kb_s)
        extra["time_per_request_all_ms"] = per_all
    return extra


@dataclass(frozen=True)
class Verdict:
    """What the gate decided for one measurement, and why (decided in compare.py only)."""

    status: Status
    reasons: tuple[str, ...] = ()  # one readable line per failed check
    notes: tuple[str, ...] = ()  # improvements and other remarks, never failures
    # every evaluated check with its numbers (checking.CheckResult.to_dict()), for reports
    checks: tuple[Mapping[str, Any], ...] = ()

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "checks": [dict(c) for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            status=data["status"],
            reasons=tuple(data.get("reasons", ())),
            notes=tuple(data.get("notes", ())),
            checks=tuple(dict(c) for c in data.get("checks", ())),
        )


@dataclass(frozen=True)
class Measurement:
    """All repetitions of one workload against one target in one test."""

    nodeid: str
    name: str  # the measurement's name within the test (default: the path)
    server: str
    concurrency: int
    workload: Workload
    runs: tuple[RunResult, ...]
    target: Mapping[str, Any] = field(default_factory=dict)  # image, limits, url
    verdict: Verdict | None = None
    # A/B runs: the base side's repetitions (pair i is base_runs[i] against runs[i]) and
    # what the base was (ref, commit, base target, order and instance of each pair)
    base_runs: tuple[RunResult, ...] = ()
    against: Mapping[str, Any] | None = None
    # what sent the load: the HTTP user, resolved (native, lean, fast, module:Class), or
    # mqtt; part of the machine id its baseline is kept under. None: not recorded (the
    # run's HTTP user is taken)
    generator: str | None = None
    profile: Mapping[str, Any] | None = None  # A/B runs: the differential CPU profile
    # webperf.capacity: the search (runs: its highest probe that met the SLO), and in an
    # A/B run the base's search (base_runs: its probe so)
    capacity: Capacity | None = None
    base_capacity: Capacity | None = None

    @property
    def key(self) -> str:
        return f"{self.nodeid}::{self.name}"

    def _mean(self, values: Sequence[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    @property
    def rps(self) -> float:
        return self._mean([r.rps for r in self.runs])

    @property
    def requests(self) -> int:
        return sum(r.requests for r in self.runs)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    @property
    def timeouts(self) -> int:
        return sum(r.timeouts for r in self.runs)

    def latency_ms(self, percentile: str) -> float:
        """Mean over repetitions of a latency field, e.g. ``p95_ms``."""
        return self._mean([float(getattr(r.latency, percentile)) for r in self.runs])

    @property
    def endpoints(self) -> dict[str, EndpointSummary]:
        """A request mix's endpoints over the repetitions (side B's in an A/B run), by
        name; empty for a single request shape."""
        return endpoint_summaries(self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "name": self.name,
            "server": self.server,
            "concurrency": self.concurrency,
            "workload": self.workload.to_dict(),
            "target": dict(self.target),
            "runs": [r.to_dict() for r in self.runs],
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "base_runs": [r.to_dict() for r in self.base_runs],
            "against": None if self.against is None else dict(self.against),
            **({"generator": self.generator} if self.generator is not None else {}),
            "profile": None if self.profile is None else dict(self.profile),
            **({"capacity": self.capacity.to_dict()} if self.capacity is not None else {}),
            **({"base_capacity": self.base_capacity.to_dict()} if self.base_capacity else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        verdict = data.get("verdict")
        return cls(
            nodeid=str(data["nodeid"]),
            name=str(data["name"]),
            server=str(data["server"]),
            concurrency=int(data["concurrency"]),
            workload=Workload.from_dict(data.get("workload", {})),
            runs=tuple(RunResult.from_dict(r) for r in data["runs"]),
            target=dict(data.get("target", {})),
            verdict=None if verdict is None else Verdict.from_dict(verdict),
            base_runs=tuple(RunResult.from_dict(r) for r in data.get("base_runs") or ()),
            against=None if data.get("against") is None else dict(data["against"]),
            generator=None if data.get("generator") is None else str(data["generator"]),
            profile=None if data.get("profile") is None else dict(data["profile"]),
            capacity=Capacity.from_dict(data["capacity"]) if data.get("capacity") else None,
            base_capacity=(
                Capacity.from_dict(data["base_capacity"]) if data.get("base_capacity") else None
            ),
        )
