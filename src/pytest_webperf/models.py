"""Frozen value objects that are saved or sent, each with ``to_dict``/``from_dict``.

``SCHEMA_VERSION`` is the version of the dict layout written by ``to_dict``;
readers of stored data (baselines, reports) check it and upgrade or refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from pytest_webperf.capacity import Capacity
from pytest_webperf.histogram import Histogram
from pytest_webperf.workload import Workload

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


@dataclass(frozen=True)
class Delivery:
    """Where one consumer's copy of an MQTT run went (the observer, or the server's store).

    ``missing`` counts PUBCOMP-acknowledged messages (QoS 2; PUBACK at QoS 1) that this
    consumer never got by the cutoff; they are ``backlog`` if deliveries were still
    arriving at the cutoff (late, not gone), else ``lost``.
    """

    consumer: str  # "observer" or "store"
    received: int  # every copy, duplicates included
    delivered: int  # distinct (clientId, seq) among the published
    duplicates: int  # copies beyond the first of the same (clientId, seq)
    missing: int
    lost: int
    backlog: int
    unexpected: int = 0  # copies with a (clientId, seq) never published in this run
    latency: Latency | None = None  # send -> receipt (observer) or send -> row (store)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["latency"] = None if self.latency is None else self.latency.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Delivery:
        known = _known(cls, data)
        latency = known.get("latency")
        known["latency"] = None if latency is None else Latency.from_dict(latency)
        return cls(**known)


@dataclass(frozen=True)
class MqttResult:
    """One MQTT repetition's accounting: every message published, acknowledged, delivered.

    Covers the whole swarm (warm-up included: a message lost in warm-up is still lost).
    ``tps`` is seed 002's throughput: messages the server stored / (last row's time -
    first send), so a stalled broker lowers it as it did in the seed.
    """

    qos: int
    interval_s: float  # 0: flat out
    users: int
    published: int
    acked: int  # PUBCOMP (QoS 2) / PUBACK (QoS 1) received by the publishers
    unacked: int  # still unacknowledged after the grace at the end
    publish_errors: int = 0
    connect_failures: int = 0
    disconnects: int = 0
    late: int = 0  # paced sends more than one interval behind schedule
    pace_lag: Latency | None = None  # how late sends were against their schedule
    observer: Delivery | None = None
    store: Delivery | None = None
    tps: float | None = None
    span_s: float = 0.0  # first send to last stored row (or last delivery)
    drain_s: float = 0.0  # time waited after the swarm stopped

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("pace_lag", "observer", "store"):
            value = getattr(self, name)
            data[name] = None if value is None else value.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MqttResult:
        known = _known(cls, data)
        if known.get("pace_lag") is not None:
            known["pace_lag"] = Latency.from_dict(known["pace_lag"])
        for name in ("observer", "store"):
            if known.get(name) is not None:
                known[name] = Delivery.from_dict(known[name])
        return cls(**known)


@dataclass(frozen=True)
class EndpointResult:
    """One endpoint of a request mix (or one request name of a user's own Locust users)
    in one repetition: what its requests did, over the repetition's measured phase.

    The run's own figures (``RunResult.requests``, ``latency``, ...) are the sum over
    its endpoints; server CPU is the run's alone (it cannot be split by request)."""

    name: str  # the entry's name (default: its path), or the name Locust recorded
    method: str
    requests: int  # completed requests, failed ones included
    errors: int
    bytes: int
    duration_s: float  # the repetition's measured phase (the same for every endpoint)
    latency: Latency
    histogram: Histogram = field(repr=False, compare=False, default_factory=Histogram)
    error_kinds: Mapping[str, int] = field(default_factory=dict)
    error_examples: Mapping[str, str] = field(default_factory=dict)
    weight: float | None = None  # the share asked of a mix entry (weights normalised), if any

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "requests": self.requests,
            "errors": self.errors,
            "bytes": self.bytes,
            "duration_s": self.duration_s,
            "rps": self.rps,
            "latency": self.latency.to_dict(),
            "histogram": self.histogram.to_dict(),
            "error_kinds": dict(self.error_kinds),
            "error_examples": dict(self.error_examples),
            "weight": self.weight,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointResult:
        return cls(
            name=str(data["name"]),
            method=str(data.get("method", "GET")),
            requests=int(data["requests"]),
            errors=int(data.get("errors", 0)),
            bytes=int(data.get("bytes", 0)),
            duration_s=float(data["duration_s"]),
            latency=Latency.from_dict(data["latency"]),
            histogram=Histogram.from_dict(data.get("histogram", {})),
            error_kinds={str(k): int(v) for k, v in data.get("error_kinds", {}).items()},
            error_examples={str(k): str(v) for k, v in data.get("error_examples", {}).items()},
            weight=None if data.get("weight") is None else float(data["weight"]),
        )


@dataclass(frozen=True)
class EndpointSummary:
    """One endpoint over all repetitions of a measurement (``Measurement.endpoints``):
    what a report shows in the endpoint's row. Latency figures are means over the
    repetitions in which the endpoint completed a request (as the run's own are)."""

    name: str
    method: str
    requests: int  # summed over repetitions, failed ones included
    errors: int
    rps: float  # mean over repetitions (0 for a repetition that did not send it)
    share: float  # its requests / the requests of every endpoint
    weight: float | None  # the share asked of the mix (normalised), if any
    latency: Latency | None  # None when no request of it completed

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "rps": self.rps,
            "share": self.share,
            "weight": self.weight,
            "latency": None if self.latency is None else self.latency.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointSummary:
        latency = data.get("latency")
        return cls(
            name=str(data["name"]),
            method=str(data.get("method", "GET")),
            requests=int(data["requests"]),
            errors=int(data.get("errors", 0)),
            rps=float(data["rps"]),
            share=float(data.get("share", 0.0)),
            weight=None if data.get("weight") is None else float(data["weight"]),
            latency=None if latency is None else Latency.from_dict(latency),
        )


def endpoint_summaries(runs: Sequence[RunResult]) -> dict[str, EndpointSummary]:
    """Each endpoint of ``runs`` (in the order first sent) over all of them; empty when
    the runs sent a single request shape."""
    names = list(dict.fromkeys(name for run in runs for name in run.endpoints))
    total = sum(e.requests for run in runs for e in run.endpoints.values())
    found: dict[str, EndpointSummary] = {}
    for name in names:
        mine = [run.endpoints[name] for run in runs if name in run.endpoints]
        requests = sum(e.requests for e in mine)
        timed = [e.latency for e in mine if e.requests]
        latency = None
        if timed:
            latency = Latency(
                **{
                    f.name: sum(float(getattr(t, f.name)) for t in timed) / len(timed)
                    for f in fields(Latency)
                }
            )
        weights = [e.weight for e in mine if e.weight is not None]
        found[name] = EndpointSummary(
            name=name,
            method=mine[0].method,
            requests=requests,
            errors=sum(e.errors for e in mine),
            rps=sum(e.rps for e in mine) / len(runs),
            share=requests / total if total else 0.0,
            weight=weights[0] if weights else None,
            latency=latency,
        )
    return found


@dataclass(frozen=True)
class RunResult:
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

    @property
    def time_per_request_ms(self) -> float | None:
        """ab's "Time per request (mean)": concurrency x time taken / requests."""
        return self.concurrency * self.duration_s * 1000 / self.requests if self.requests else None

    @property
    def transfer_kb_s(self) -> float:
        """ab's "Transfer rate" (of bodies here), KB/s."""
        return self.bytes / 1024 / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def capacity_rps(self) -> float | None:
        """An estimate: requests/s the cores the target could use (``server_cores``, see
        ``measure.usable_cores``: never more than its threads can run at once) could serve
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
            "duration_s": self.duration_s,
            "rps": self.rps,
            "requests": self.requests,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "connect_errors": self.connect_errors,
            "error_kinds": dict(self.error_kinds),
            "error_examples": dict(self.error_examples),
            "bytes": self.bytes,
            "latency": self.latency.to_dict(),
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
            "histogram": self.histogram.to_dict(),
            "notes": list(self.notes),
            "mqtt": None if self.mqtt is None else self.mqtt.to_dict(),
            **_schedule_and_count(self),
            **(
                {"endpoints": {n: e.to_dict() for n, e in self.endpoints.items()}}
                if self.endpoints
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            repetition=int(data["repetition"]),
            concurrency=int(data["concurrency"]),
            duration_s=float(data["duration_s"]),
            requests=int(data["requests"]),
            errors=int(data["errors"]),
            timeouts=int(data["timeouts"]),
            connect_errors=int(data.get("connect_errors", 0)),
            bytes=int(data.get("bytes", 0)),
            latency=Latency.from_dict(data["latency"]),
            series=tuple(Snapshot.from_dict(s) for s in data.get("series", ())),
            histogram=Histogram.from_dict(data.get("histogram", {})),
            resources=tuple(ResourceSample.from_dict(r) for r in data.get("resources", ())),
            generator=tuple(GeneratorSample.from_dict(g) for g in data.get("generator", ())),
            error_kinds=dict(data.get("error_kinds", {})),
            error_examples=dict(data.get("error_examples", {})),
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
    # every evaluated check with its numbers (compare.CheckResult.to_dict()), for reports
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
