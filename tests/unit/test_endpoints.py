"""Per-endpoint results: a run's recorder channels become ``RunResult.endpoints``."""

from __future__ import annotations

from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.measurement.repetition import endpoint_results, run_result
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.swarm.recorder import Interval, Recorder
from pytest_webperf.swarm.runner import SwarmOutcome


def rolled() -> Interval:
    recorder = Recorder()
    a, create = recorder.channel("GET", "/a"), recorder.channel("POST", "create")
    for latency in (100, 200, 300):
        a.record(latency, 10)
    create.record(900, 5)
    create.record_error("unexpected_body", 950, 5, "HTTP/1.1 200 OK: b'nope'")
    return recorder.roll()


def test_a_run_of_several_channels_has_one_endpoint_each_summing_to_the_whole() -> None:
    total = rolled()
    outcome = SwarmOutcome(duration_s=2.0, total=total)
    plan = RunPlan(concurrency=2, duration_s=2.0, warmup_s=0.0, repeat=1)
    weights = {("GET", "/a"): 0.75, ("POST", "create"): 0.25, ("GET", "/never"): 0.0}
    result = run_result(outcome, 1, plan, None, weights=weights)
    assert set(result.endpoints) == {"/a", "create", "/never"}
    a, create, never = (result.endpoints[n] for n in ("/a", "create", "/never"))
    assert (a.requests, a.errors, a.bytes, a.weight, a.rps) == (3, 0, 30, 0.75, 1.5)
    assert (create.method, create.requests, create.errors) == ("POST", 2, 1)
    assert create.error_examples == {"unexpected_body": "HTTP/1.1 200 OK: b'nope'"}
    assert never.requests == 0  # a mix's entry that never completed is still a row
    assert sum(e.requests for e in result.endpoints.values()) == result.requests == 5
    assert sum(e.errors for e in result.endpoints.values()) == result.errors
    assert RunResult.from_dict(result.to_dict()).endpoints == result.endpoints


def test_a_single_request_shape_has_no_endpoints() -> None:
    recorder = Recorder()
    recorder.channel("GET", "/hello").record(100, 1)
    outcome = SwarmOutcome(duration_s=1.0, total=recorder.roll())
    plan = RunPlan(concurrency=1, duration_s=1.0, warmup_s=0.0, repeat=1)
    assert run_result(outcome, 1, plan, None).endpoints == {}


def test_two_methods_of_one_name_are_told_apart() -> None:
    total = Interval()
    for method in ("GET", "POST"):
        part = Interval()
        part.record(100, 1)
        total.endpoints[(method, "/item")] = part
    assert set(endpoint_results(total, 1.0, {})) == {"GET /item", "POST /item"}
