"""What a check can look at: one ``Metric`` per measurable figure, read from a ``RunResult``.

The metric table is the one place that says how a figure is read from a repetition,
which direction is worse, and how repetitions combine; ``checks`` parses what users
write about them, ``compare`` decides. Adding a metric is one entry in ``METRICS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pytest_webperf.models.endpoints import EndpointResult
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.mqtt import Delivery
from pytest_webperf.sampling import resources

Direction = Literal["up", "down"]  # the direction that is bad
Combine = Literal["mean", "max", "sum", "rate"]


def _server_cpu_series(run: RunResult) -> list[float]:
    """Server CPU % per tick of the measured phase, summed over the parts."""
    return resources.server_cpu_series(run.resources)


def _server_cpu_mean(run: RunResult) -> float | None:
    cpu = resources.cpu_stats(run.resources)
    return None if cpu is None else cpu.mean


def _server_rss_peak(run: RunResult) -> float | None:
    return resources.server_rss_peak(run.resources)


def _cpu_per_req(run: RunResult) -> float | None:
    """Service demand in µs: the cgroup counter when there is one, else the sampled
    CPU % integrated over the measured phase (loses processes that died between polls)."""
    if run.cpu_per_req_us is not None:
        return run.cpu_per_req_us
    cpu = _server_cpu_mean(run)
    if cpu is None or not run.requests:
        return None
    return cpu / 100 * run.duration_s * 1e6 / run.requests


def _rps_series(run: RunResult) -> list[float]:
    return [s.rps for s in run.series if s.elapsed > 0]


def _latency(name: str) -> Callable[[RunResult], float | None]:
    return lambda run: float(getattr(run.latency, name))


def _snapshot_latency(name: str) -> Callable[[RunResult], list[float]]:
    def series(run: RunResult) -> list[float]:
        values = (getattr(s, name) for s in run.series)
        return [float(v) for v in values if v is not None]

    return series


def _delivery(run: RunResult) -> Delivery | None:
    """Where an MQTT run's messages ended: the server's store (what seed 002 counts)
    when it was read back, else the observer subscriber."""
    if run.mqtt is None:
        return None
    return run.mqtt.store or run.mqtt.observer


def _service_p99(run: RunResult) -> float | None:
    return None if run.service is None else run.service.p99_ms


def _lag_p99(run: RunResult) -> float | None:
    return None if run.schedule_lag is None else run.schedule_lag.p99_ms


def _connect_p99(run: RunResult) -> float | None:
    return None if run.connect is None else run.connect.p99_ms


def _tls_p99(run: RunResult) -> float | None:
    return None if run.tls_handshake is None else run.tls_handshake.p99_ms


def _ttfb_p99(run: RunResult) -> float | None:
    return None if run.ttfb is None else run.ttfb.p99_ms


def _tps(run: RunResult) -> float | None:
    return run.mqtt.tps if run.mqtt is not None and run.mqtt.tps is not None else run.rps


def _delivery_count(name: str) -> Callable[[RunResult], float | None]:
    def count(run: RunResult) -> float | None:
        delivery = _delivery(run)
        return None if delivery is None else float(getattr(delivery, name))

    return count


def _e2e_p99(run: RunResult) -> float | None:
    delivery = _delivery(run)
    return None if delivery is None or delivery.latency is None else delivery.latency.p99_ms


def _stream(figure: str, modes: tuple[str, ...] = ()) -> Callable[[RunResult], float | None]:
    """A stream run's figure (``StreamResult``): a field, or the run's own latency
    (``latency.p99_ms``) where it is a mode's (``modes``: round trip, delay, gaps)."""

    def read(run: RunResult) -> float | None:
        if run.stream is None or (modes and run.stream.mode not in modes):
            return None
        value: Any = run if figure.startswith("latency.") else run.stream
        for part in figure.split("."):
            value = getattr(value, part, None) if value is not None else None
        return None if value is None else float(value)

    return read


def _expected(run: RunResult) -> float:
    return float(run.stream.expected) if run.stream is not None else 0.0


def _opens(run: RunResult) -> float:
    return float(max(run.stream.opens, 1)) if run.stream is not None else 0.0


STREAM_ONLY = "it is a WebSocket or SSE figure, of the whole run"
ECHO, MESSAGES = ("echo", "idle"), ("echo", "fanout")
_LATENCY: dict[str, Any] = {"load_sensitive": True}
_COUNT: dict[str, Any] = {"combine": "sum", "count": True, "exposure": _expected}
_EVENTS = {**_COUNT, "events": "events"}
_OPENS = {**_COUNT, "exposure": _opens, "events": "connections"}
# name, unit, bad direction, the figure (``_stream``), its modes, how it is judged
STREAM_METRICS: tuple[tuple[str, str, Direction, str, tuple[str, ...], dict[str, Any]], ...] = (
    ("ws_rtt_p50", "ms", "up", "latency.p50_ms", ECHO, _LATENCY),
    ("ws_rtt_p99", "ms", "up", "latency.p99_ms", ECHO, _LATENCY),
    ("ws_delay_p99", "ms", "up", "latency.p99_ms", ("fanout",), _LATENCY),
    ("ws_upgrade_p95", "ms", "up", "upgrade.p95_ms", (), _LATENCY),
    ("ws_lost", "", "up", "lost", MESSAGES, {**_COUNT, "events": "messages"}),
    ("ws_dup", "", "up", "duplicates", MESSAGES, {**_COUNT, "events": "messages"}),
    ("ws_out_of_order", "", "up", "out_of_order", MESSAGES, {**_COUNT, "events": "messages"}),
    ("ws_abnormal", "", "up", "abnormal", (*ECHO, "fanout"), _OPENS),
    ("ttfe_p50", "ms", "up", "ttfe.p50_ms", ("sse",), _LATENCY),
    ("ttfe_p95", "ms", "up", "ttfe.p95_ms", ("sse",), _LATENCY),
    ("sse_gap_p99", "ms", "up", "latency.p99_ms", ("sse",), _LATENCY),
    ("sse_lost", "", "up", "lost", ("sse",), _EVENTS),
    ("sse_reconnects", "", "up", "reconnects", ("sse",), _OPENS),
    ("sse_events_per_s_min", "/s", "down", "events_per_s_min", (), {"load_sensitive": True}),
    # bytes of memory per open connection: the server's (RSS, all parts), the generator's
    ("mem_per_conn", "B", "up", "mem_per_conn", (), {}),
    ("gen_mem_per_conn", "B", "up", "gen_mem_per_conn", (), {}),
)


def _published(run: RunResult) -> float:
    return float(run.mqtt.published) if run.mqtt is not None else 0.0


def requests_exposure(run: RunResult) -> float:
    return float(run.requests)


def _endpoint_latency(name: str) -> Callable[[EndpointResult], float | None]:
    """An endpoint's latency figure; None when none of its requests completed."""
    return lambda e: float(getattr(e.latency, name)) if e.requests else None


# Why a metric has no per-endpoint reading (the check grammar says it in one line).
SERVER_WIDE = "the server's CPU and memory belong to the whole run, they cannot be split by request"
MQTT_ONLY = "it is an MQTT figure, and a request mix is HTTP"
NOT_RECORDED = "it is not recorded per endpoint"
COUNTED_ONLY = "it is counted over a whole counted window (count=True), not per endpoint"


def _counted(name: str) -> Callable[[RunResult], float | None]:
    """A counted repetition's figure per request (None in a timed repetition)."""
    return lambda run: None if run.counts is None else getattr(run.counts, name)


@dataclass(frozen=True)
class Metric:
    """One thing a check can look at.

    ``per_run`` gives the value of one repetition (None: not measured); ``series``
    its per-second values (for the within-run spread); ``combine`` says how the
    repetitions make the value an absolute limit is held against. ``count`` metrics
    are event counts compared as rates per request. ``throughput`` metrics measure
    the generator when it is the bottleneck. ``load_sensitive`` metrics (throughput and
    latency) move when other processes take the machine's CPU, so a relative check on
    them is not judged when either run was contended; service demand is not affected.
    """

    name: str
    unit: str
    bad: Direction
    per_run: Callable[[RunResult], float | None] = field(compare=False)
    series: Callable[[RunResult], list[float]] | None = field(default=None, compare=False)
    combine: Combine = "mean"
    count: bool = False
    throughput: bool = False
    load_sensitive: bool = False  # moves when other processes take the CPU (rps, latency)
    aliases: tuple[str, ...] = ()  # the first one is how absolute limits are written
    exposure: Callable[[RunResult], float] = field(default=requests_exposure, compare=False)
    # the same figure read from one endpoint of a request mix (``RunResult.endpoints``);
    # None: it cannot be split by endpoint, and ``whole_run_only`` says why
    per_endpoint: Callable[[EndpointResult], float | None] | None = field(
        default=None, compare=False
    )
    whole_run_only: str = NOT_RECORDED
    endpoint: str | None = None  # set on the copy ``for_endpoint`` makes
    events: str = "requests"  # what a count metric's exposure counts
    # counted figures (count=True): changes and what a run could detect shown to 0.01 %;
    # a figure that may be 0 (no allocation, no system call): 0 -> more is judged as such
    precise: bool = False
    may_be_zero: bool = False
    counted: bool = False  # read from a counted repetition's callgrind window (or beside it)

    @property
    def limit_name(self) -> str:
        return self.aliases[0] if self.aliases else self.name

    @property
    def label(self) -> str:
        """How verdicts name the figure: ``p95``, or ``p95[create]`` for an endpoint."""
        return self.name if self.endpoint is None else f"{self.name}[{self.endpoint}]"

    def for_endpoint(self, endpoint: str) -> Metric:
        """The metric read from ``run.endpoints[endpoint]`` of every repetition (None
        where a repetition has no such endpoint); counts are rates per request of that
        endpoint. Endpoints have no per-second series, so no within-run spread."""
        read = self.per_endpoint
        if read is None:
            raise ValueError(f"{self.name} cannot be split by endpoint: {self.whole_run_only}")

        def per_run(run: RunResult) -> float | None:
            found = run.endpoints.get(endpoint)
            return None if found is None else read(found)

        def exposure(run: RunResult) -> float:
            found = run.endpoints.get(endpoint)
            return 0.0 if found is None else float(found.requests)

        return replace(self, per_run=per_run, series=None, exposure=exposure, endpoint=endpoint)


def _latency_metric(name: str, figure: str, *, per_second: bool = False) -> Metric:
    """A latency figure (a percentile or the mean, ``figure`` of ``Latency``): the run's,
    each endpoint's, and per second where the generator's snapshots carry it."""
    return Metric(
        name,
        "ms",
        "up",
        _latency(figure),
        _snapshot_latency(figure) if per_second else None,
        aliases=(figure,),
        load_sensitive=True,
        per_endpoint=_endpoint_latency(figure),
    )


# Adding a metric is one line.
METRICS: Mapping[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "rps",
            "",
            "down",
            lambda r: r.rps,
            _rps_series,
            throughput=True,
            load_sensitive=True,
            per_endpoint=lambda e: e.rps,
        ),
        Metric(
            "tps",
            "",
            "down",
            _tps,
            _rps_series,
            throughput=True,  # seed 002's msgs/s
            load_sensitive=True,
            whole_run_only=MQTT_ONLY,
        ),
        *(
            _latency_metric(f"p{q}", f"p{q}_ms", per_second=q in ("50", "95", "99"))
            for q in ("50", "90", "95", "99", "999")
        ),
        _latency_metric("latency_mean", "mean_ms"),
        Metric(
            "errors",
            "",
            "up",
            lambda r: r.errors,
            combine="sum",
            count=True,
            per_endpoint=lambda e: e.errors,
        ),
        Metric("timeouts", "", "up", lambda r: r.timeouts, combine="sum", count=True),
        Metric(
            "error_rate",
            "",
            "up",
            lambda r: r.errors,
            combine="rate",
            count=True,
            per_endpoint=lambda e: e.errors,
        ),
        Metric(
            "cpu",
            "%",
            "up",
            _server_cpu_mean,
            _server_cpu_series,
            aliases=("cpu_percent",),
            whole_run_only=SERVER_WIDE,
        ),
        Metric(
            "rss",
            "MB",
            "up",
            _server_rss_peak,
            combine="max",
            aliases=("rss_mb",),
            whole_run_only=SERVER_WIDE,
        ),
        Metric(
            "cpu_per_req",
            "us",
            "up",
            _cpu_per_req,
            aliases=("cpu_per_req_us",),
            whole_run_only=SERVER_WIDE,
        ),
        Metric(
            "lost",
            "",
            "up",
            _delivery_count("lost"),
            combine="sum",
            count=True,
            exposure=_published,
            whole_run_only=MQTT_ONLY,
            events="messages",
        ),
        Metric(
            "dup",
            "",
            "up",
            _delivery_count("duplicates"),
            combine="sum",
            count=True,
            exposure=_published,
            aliases=("duplicates",),
            whole_run_only=MQTT_ONLY,
            events="messages",
        ),
        Metric(
            "e2e_p99",
            "ms",
            "up",
            _e2e_p99,
            aliases=("e2e_p99_ms",),
            load_sensitive=True,
            whole_run_only=MQTT_ONLY,
        ),
        # paced HTTP: p99 of send-to-response (p99 itself counts from the intended start),
        # and of how late the generator sent with the connection free
        Metric(
            "service_p99",
            "ms",
            "up",
            _service_p99,
            aliases=("service_p99_ms",),
            load_sensitive=True,
        ),
        Metric("lag_p99", "ms", "up", _lag_p99, aliases=("lag_p99_ms",), load_sensitive=True),
        # a new connection per request (keepalive=False): TCP connect and TLS handshake
        Metric(
            "connect_p99",
            "ms",
            "up",
            _connect_p99,
            aliases=("connect_p99_ms",),
            load_sensitive=True,
        ),
        Metric("tls_p99", "ms", "up", _tls_p99, aliases=("tls_p99_ms",), load_sensitive=True),
        # HTTP/2: each stream's time to its response headers (time to first byte)
        Metric("ttfb_p99", "ms", "up", _ttfb_p99, aliases=("ttfb_p99_ms",), load_sensitive=True),
        # an arrival rate: the most users (connections) busy at once, what the pace needed
        Metric(
            "users_used",
            "",
            "up",
            lambda r: r.users_peak,
            combine="max",
            aliases=("users_peak",),
            load_sensitive=True,
        ),
        # webperf.capacity: the highest arrival rate that met the SLO (capacity_gate.py
        # judges it: a search's answer is an interval, not a figure per repetition)
        Metric(
            "capacity",
            "/s",
            "down",
            lambda r: None,
            throughput=True,
            whole_run_only="it is a capacity search's answer, of the whole search",
        ),
        # a fixed request count (ab's -n): its time taken, and ab's transfer rate
        Metric(
            "time_taken",
            "s",
            "up",
            lambda r: r.duration_s if r.requests_asked else None,
            aliases=("time_taken_s",),
            load_sensitive=True,
        ),
        # counted, not timed (count=True): per request, from callgrind's counters and the
        # native window beside them (docs/reference/metrics.md)
        Metric(
            "instructions_per_req",
            "",
            "up",
            _counted("instructions_per_req"),
            whole_run_only=COUNTED_ONLY,
            precise=True,
            counted=True,
        ),
        Metric(
            "allocs_per_req",
            "",
            "up",
            _counted("allocs_per_req"),
            whole_run_only=COUNTED_ONLY,
            precise=True,
            counted=True,
            may_be_zero=True,
        ),
        Metric(
            "syscalls_per_req",
            "",
            "up",
            _counted("syscalls_per_req"),
            whole_run_only=COUNTED_ONLY,
            precise=True,
            counted=True,
            may_be_zero=True,
        ),
        # every repetition's (a counted one's: its native window's)
        Metric(
            "ctx_switches_per_req",
            "",
            "up",
            lambda r: r.ctx_switches_per_req,
            whole_run_only=SERVER_WIDE,
            precise=True,
            may_be_zero=True,
        ),
        Metric(
            "transfer_rate",
            "KB/s",
            "down",
            lambda r: r.transfer_kb_s,
            aliases=("transfer_kb_s",),
            throughput=True,
            load_sensitive=True,
        ),
        *(
            Metric(n, unit, bad, _stream(fig, modes), whole_run_only=STREAM_ONLY, **how)
            for n, unit, bad, fig, modes, how in STREAM_METRICS
        ),
    )
}
BY_SPELLING: Mapping[str, Metric] = {
    spelling: m for m in METRICS.values() for spelling in (m.name, *m.aliases)
}


# A quarter of a core used by other processes while measuring: above it, throughput and
# latency changes are not the server's (measured here: rps moved -11..-28% on an unchanged
# server under other agents' load, while cpu_per_req stayed within +-4%).
CONTENDED_CPU_PERCENT = 25.0


def foreign_cpu(m: Measurement) -> float:
    """Mean CPU other processes used during the measurement's runs (0 when unknown)."""
    values = [r.foreign_cpu_percent for r in m.runs if r.foreign_cpu_percent is not None]
    return sum(values) / len(values) if values else 0.0
