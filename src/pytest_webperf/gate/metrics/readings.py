"""How each figure is read from a repetition (``RunResult``), an endpoint and a stream
run: the readers the metric table points to, and why a metric has no per-endpoint reading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pytest_webperf.models.endpoints import EndpointResult
from pytest_webperf.models.measurement import RunResult
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


def _store_delay_p99(run: RunResult) -> float | None:
    """The publish-to-store delay's p99 (ms): from each message's send to its row in the
    server's store (seed 002's "pause" between the broker and the subscribing server)."""
    store = run.mqtt.store if run.mqtt is not None else None
    return None if store is None or store.latency is None else store.latency.p99_ms


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
