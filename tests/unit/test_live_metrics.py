"""Live metrics (``report/otlp.py``): the receiver's URL, the figures of each tick on the SDK's
instruments (counters in the measured phase only), a clear line without the SDK."""

from __future__ import annotations

import sys

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.models.progress import Tick
from pytest_webperf.report.otlp import MISSING, LiveMetrics, endpoint
from pytest_webperf.values import parse_http_url

metrics = pytest.importorskip("opentelemetry.sdk.metrics")
export = pytest.importorskip("opentelemetry.sdk.metrics.export")


def tick(phase: str, requests: int, **more: object) -> Tick:
    figures = {"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "users": 4, **more}
    return Tick(
        nodeid="t.py::test_x", name="GET /", side="", repetition=2, repetitions=3,
        phase=phase, elapsed_s=1.0, total_s=5.0, rps=float(requests), errors=0,
        requests=requests, new_errors=1, **figures,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_receiver_url() -> None:
    assert endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/metrics"
    assert endpoint("http://127.0.0.1:4318/") == "http://127.0.0.1:4318/v1/metrics"
    assert endpoint("https://otel:4318/custom") == "https://otel:4318/custom"
    with pytest.raises(OptionError, match="--webperf-otlp='udp://x'"):
        endpoint("udp://x")
    with pytest.raises(ValueError, match="not an http"):
        parse_http_url("localhost:4318")


def test_each_tick_on_the_instruments() -> None:
    reader = export.InMemoryMetricReader()
    live = LiveMetrics(metrics.MeterProvider(metric_readers=[reader]))
    live.update(tick("warm-up", 50))
    live.update(tick("measuring", 100, server_cpu_percent=55.0, server_rss_mb=12.5))
    live.update(tick("measuring", 120))
    data = reader.get_metrics_data()
    assert data is not None
    found = {
        (m.name, p.attributes["webperf.phase"]): p.value
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        for p in m.data.data_points
    }
    assert found[("webperf.requests", "measuring")] == 220  # the warm-up not counted
    assert ("webperf.requests", "warm-up") not in found
    assert found[("webperf.errors", "measuring")] == 2
    assert found[("webperf.rps", "measuring")] == 120  # a gauge: the last second
    assert found[("webperf.rps", "warm-up")] == 50
    assert found[("webperf.server.cpu", "measuring")] == 55.0  # kept from its last sample
    assert found[("webperf.latency.p99", "measuring")] == 3.0
    point = next(
        p
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        for p in m.data.data_points
    )
    assert point.attributes["test.nodeid"] == "t.py::test_x"
    assert point.attributes["webperf.repetition"] == 2
    live.close()


def test_without_the_sdk_one_line_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.metrics", None)
    with pytest.raises(OptionError) as caught:
        LiveMetrics.start("http://127.0.0.1:4318")
    assert str(caught.value) == MISSING and "pytest-webperf[otlp]" in MISSING
