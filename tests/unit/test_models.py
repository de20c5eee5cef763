import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.models.endpoints import EndpointResult
from pytest_webperf.models.measurement import Measurement, RunResult, Verdict
from pytest_webperf.models.samples import Latency, ResourceSample, Snapshot
from pytest_webperf.models.workload import Workload
from pytest_webperf.stats.histogram import Histogram


def run_result(requests: int = 1000, duration: float = 2.0, cpu: float | None = 0.5) -> RunResult:
    histogram = Histogram()
    histogram.record_many([500, 1000, 1500])
    return RunResult(
        repetition=1,
        concurrency=10,
        duration_s=duration,
        requests=requests,
        errors=2,
        timeouts=1,
        connect_errors=0,
        bytes=20 * requests,
        latency=Latency.of(histogram),
        series=(Snapshot(1.0, 1.0, 10, requests, 2, 1, 20 * requests, 1.0, 1.5, 1.5),),
        histogram=histogram,
        resources=(
            ResourceSample(
                t=0.5, part="nginx", cpu_percent=50.0, rss_mb=12.0, processes=3, threads=3
            ),
        ),
        error_kinds={"timeout": 1, "http_500": 1},
        error_examples={"http_500": "HTTP/1.1 500 Internal Server Error"},
        server_cpu_seconds=cpu,
    )


@given(st.integers(min_value=0, max_value=10**9), st.floats(min_value=0.001, max_value=1e4))
def test_rps_is_requests_over_duration(requests, duration):
    result = run_result(requests, duration)
    assert result.rps == requests / duration


def test_service_demand_in_microseconds():
    assert run_result(requests=1000, cpu=0.5).cpu_per_req_us == 500.0
    assert run_result(cpu=None).cpu_per_req_us is None
    assert run_result(requests=0).cpu_per_req_us is None


def test_measurement_round_trip():
    measurement = Measurement(
        nodeid="t.py::test[c10]",
        name="GET /hello",
        server="nginx",
        concurrency=10,
        workload=Workload("/telemetry", "POST", b'{"a": 1}', (("Content-Type", "json"),)),
        runs=(run_result(), run_result(2000)),
        target={"image": "x"},
        verdict=Verdict("pass", notes=("rps +3%",)),
    )
    clone = Measurement.from_dict(measurement.to_dict())
    assert clone == measurement
    assert clone.runs[0].histogram.to_dict() == measurement.runs[0].histogram.to_dict()
    assert clone.rps == measurement.rps and clone.requests == 3000


def test_newer_keys_are_ignored():
    data = run_result().to_dict()
    data["series"][0]["from_the_future"] = 1
    assert RunResult.from_dict(data).series[0].requests == 1000


def test_endpoints_round_trip():
    histogram = Histogram()
    histogram.record_many([300, 900])
    create = EndpointResult(
        name="create",
        method="POST",
        requests=250,
        errors=1,
        bytes=5000,
        duration_s=2.0,
        latency=Latency.of(histogram),
        histogram=histogram,
        error_kinds={"unexpected_body": 1},
        error_examples={"unexpected_body": "HTTP/1.1 200 OK: b''"},
        weight=0.25,
    )
    run = dataclasses.replace(run_result(), endpoints={"create": create})
    data = run.to_dict()
    assert data["endpoints"]["create"]["rps"] == 125.0
    clone = RunResult.from_dict(data)
    assert clone.endpoints == {"create": create}
    assert clone.endpoints["create"].histogram.to_dict() == histogram.to_dict()
    assert "endpoints" not in run_result().to_dict()  # a single request shape: none
    assert RunResult.from_dict(run_result().to_dict()).endpoints == {}


def test_connection_setup_times_round_trip_and_are_checkable() -> None:
    from pytest_webperf.gate.grammar import parse_checks
    from pytest_webperf.gate.metrics import METRICS

    connect, handshake = Histogram(), Histogram()
    connect.record_many([100, 200, 300])
    handshake.record_many([2000, 4000, 8000])
    run = dataclasses.replace(
        run_result(), connect=Latency.of(connect), tls_handshake=Latency.of(handshake)
    )
    data = run.to_dict()
    assert data["connect"]["p99_ms"] == run.connect.p99_ms  # type: ignore[union-attr]
    assert RunResult.from_dict(data) == run
    assert "connect" not in run_result().to_dict()  # keep-alive runs: no such figures
    assert METRICS["connect_p99"].per_run(run) == run.connect.p99_ms  # type: ignore[union-attr]
    assert METRICS["tls_p99"].per_run(run) == run.tls_handshake.p99_ms  # type: ignore[union-attr]
    assert METRICS["tls_p99"].per_run(run_result()) is None
    checks = parse_checks("tls_p99:20%,connect_p99<50")
    assert [c.metric for c in checks] == ["tls_p99", "connect_p99"]
