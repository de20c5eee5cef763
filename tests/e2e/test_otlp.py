"""Live metrics end to end: a run with --webperf-otlp exports each second through the
OpenTelemetry SDK's OTLP/HTTP exporter to a receiver built here (protobuf decoded with
opentelemetry-proto); the metrics are the expected ones, carry the test's node id and
the repetition, and agree with the JSON report."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests.e2e.asyncio_server import STALLING_SERVER

pytest_plugins = ["pytester"]

metrics_service = pytest.importorskip(
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
)

TEST = """
import sys

def test_live(webperf):
    target = webperf.process([sys.executable, "server.py"], name="asyncio")
    webperf.http(target, path="/work", concurrency=4, duration="2s", warmup="1s", repeat=2)
"""


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP metrics receiver: every export request, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.exports: list[Any] = []
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = metrics_service.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        self.server.exports.append(request)
        self.server.paths.append(self.path)
        answer = metrics_service.ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def points(receiver: Receiver) -> list[tuple[str, dict[str, Any], float]]:
    """(metric name, attributes, value) of every data point received."""
    found = []
    for export in receiver.exports:
        for resource in export.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    data = metric.gauge if metric.HasField("gauge") else metric.sum
                    for point in data.data_points:
                        attributes = {
                            a.key: getattr(a.value, a.value.WhichOneof("value"))
                            for a in point.attributes
                        }
                        value = point.as_double if point.HasField("as_double") else point.as_int
                        found.append((metric.name, attributes, float(value)))
    return found


def test_live_metrics_match_the_json_report(pytester: pytest.Pytester, receiver: Receiver) -> None:
    pytester.makepyfile(server=STALLING_SERVER, test_live=TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", f"--webperf-otlp={receiver.url}", "--webperf-json=out.json",
        timeout=180,
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    received = points(receiver)
    assert set(receiver.paths) == {"/v1/metrics"}
    names = {name for name, _, _ in received}
    assert names >= {
        "webperf.rps",
        "webperf.latency.p50",
        "webperf.latency.p95",
        "webperf.latency.p99",
        "webperf.users",
        "webperf.server.cpu",
        "webperf.server.memory",
        "webperf.requests",
        "webperf.errors",
    }, names
    assert {a["test.nodeid"] for _, a, _ in received} == {entry["nodeid"]}
    for rep in entry["repetitions"]:
        mine = [
            (name, value)
            for name, a, value in received
            if a["webperf.repetition"] == rep["repetition"] and a["webperf.phase"] == "measuring"
        ]
        # the counters are cumulative: their last value is the measured phase's total
        assert max(v for n, v in mine if n == "webperf.requests") == rep["requests"], rep
        assert max(v for n, v in mine if n == "webperf.errors") == rep["errors"] == 0
        # each second's rate exported is one of the report's seconds (its elapsed time
        # rounded to 0.1 ms)
        seconds = [s["requests"] / s["elapsed"] for s in rep["series"] if s["elapsed"] > 0]
        rates = [v for n, v in mine if n == "webperf.rps"]
        assert rates, mine
        assert all(any(abs(r - s) < 1e-3 * s for s in seconds) for r in rates), (
            rates,
            seconds,
        )
        users = {v for n, v in mine if n == "webperf.users"}
        assert users == {4}, users
        assert all(v > 0 for n, v in mine if n == "webperf.server.memory")
