"""Live metrics (``--webperf-otlp=URL``): each second of a run, as the progress display
sees it, exported as OpenTelemetry metrics through the SDK's OTLP/HTTP exporter, so a
long run lines up with a broker's or a database's own dashboards while it goes on.

    live = LiveMetrics.start("http://127.0.0.1:4318")   # the [otlp] extra installed
    progress = Tee(screen, live)                          # a Progress: measure.py ticks it
    ...
    live.close()                                          # the last export, flushed

Every point carries the test's node id (``test.nodeid``), the measurement's name, the
A/B side and the repetition (``webperf.repetition``), and the phase (warm-up or
measuring). The counters count the measured phase only, so that they add up to the
JSON report's ``requests`` and ``errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pytest_webperf.errors import OptionError
from pytest_webperf.models.progress import Progress, RepetitionDone, Tick

EXPORT_MS = 1000  # one export a second, as the swarm's intervals
MISSING = (
    "--webperf-otlp needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
    "pip install 'pytest-webperf[otlp]' (opentelemetry-sdk, "
    "opentelemetry-exporter-otlp-proto-http)"
)
GAUGES = {
    # name: (unit, description, the tick's field)
    "webperf.rps": ("{request}/s", "requests completed in the last second", "rps"),
    "webperf.latency.p50": ("ms", "median latency of the last second", "p50_ms"),
    "webperf.latency.p95": ("ms", "95th percentile latency of the last second", "p95_ms"),
    "webperf.latency.p99": ("ms", "99th percentile latency of the last second", "p99_ms"),
    "webperf.users": ("{user}", "users (connections) of the swarm", "users"),
    "webperf.server.cpu": ("%", "server CPU, 100 = a core, parts summed", "server_cpu_percent"),
    "webperf.server.memory": ("MB", "the server's resident memory, parts summed", "server_rss_mb"),
}
COUNTERS = {
    "webperf.requests": ("{request}", "requests completed in the measured phase", "requests"),
    "webperf.errors": ("{request}", "failed requests in the measured phase", "new_errors"),
}


def endpoint(url: str) -> str:
    """The OTLP/HTTP metrics endpoint of ``url``: as given when it has a path, else the
    receiver's base URL with ``/v1/metrics`` (as OTEL_EXPORTER_OTLP_ENDPOINT)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(
            f"--webperf-otlp={url!r}: an http:// or https:// URL of an OTLP/HTTP receiver "
            "(e.g. http://127.0.0.1:4318)"
        )
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/metrics"


def attributes(tick: Tick) -> dict[str, Any]:
    return {
        "test.nodeid": tick.nodeid,
        "webperf.name": tick.name,
        "webperf.side": tick.side,
        "webperf.repetition": tick.repetition,
        "webperf.phase": tick.phase,
    }


class LiveMetrics:
    """A ``Progress`` that records each tick's figures on OpenTelemetry instruments."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        meter = provider.get_meter("pytest_webperf")
        self._gauges = {
            name: (meter.create_gauge(name, unit=unit, description=text), field)
            for name, (unit, text, field) in GAUGES.items()
        }
        self._counters = {
            name: (meter.create_counter(name, unit=unit, description=text), field)
            for name, (unit, text, field) in COUNTERS.items()
        }

    @classmethod
    def start(cls, url: str, *, resource: Mapping[str, str] | None = None) -> LiveMetrics:
        """An exporter to ``url`` (one export a second), or an ``OptionError`` saying
        what to install."""
        where = endpoint(url)
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            raise OptionError(MISSING) from None
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=where), export_interval_millis=EXPORT_MS
        )
        described = Resource.create({"service.name": "pytest-webperf", **(resource or {})})
        return cls(MeterProvider(metric_readers=[reader], resource=described))

    def update(self, tick: Tick) -> None:
        where = attributes(tick)
        for gauge, field in self._gauges.values():
            value = getattr(tick, field)
            if value is not None:
                gauge.set(value, where)
        if tick.phase != "measuring":
            return
        for counter, field in self._counters.values():
            counter.add(getattr(tick, field), where)

    def done(self, repetition: RepetitionDone) -> None:
        pass

    def close(self) -> None:
        """The last figures exported, the exporter stopped."""
        self._provider.force_flush()
        self._provider.shutdown()


class Tee:
    """Several ``Progress`` at once (the display, and live metrics)."""

    def __init__(self, *each: Progress) -> None:
        self.each = each

    def update(self, tick: Tick) -> None:
        for progress in self.each:
            progress.update(tick)

    def done(self, repetition: RepetitionDone) -> None:
        for progress in self.each:
            progress.done(repetition)
