"""Every metric by name and by each spelling (``METRICS``, ``BY_SPELLING``): adding a
metric is one entry; the contention rule's limit.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_webperf.gate.metrics.metric import Metric, _latency_metric
from pytest_webperf.gate.metrics.readings import (
    COUNTED_ONLY,
    MQTT_ONLY,
    SERVER_WIDE,
    STREAM_METRICS,
    STREAM_ONLY,
    _connect_p99,
    _counted,
    _cpu_per_req,
    _delivery_count,
    _e2e_p99,
    _lag_p99,
    _published,
    _rps_series,
    _server_cpu_mean,
    _server_cpu_series,
    _server_rss_peak,
    _service_p99,
    _store_delay_p99,
    _stream,
    _tls_p99,
    _tps,
    _ttfb_p99,
)
from pytest_webperf.models.measurement import Measurement

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
        Metric(
            "store_delay_p99",
            "ms",
            "up",
            _store_delay_p99,
            aliases=("store_delay_p99_ms",),
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
            levelled=True,
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
