"""Throughput and latency are not judged on a run the rest of the machine disturbed;
service demand still is."""

import dataclasses

import pytest

from pytest_webperf.gate.decide import decide
from pytest_webperf.gate.grammar import parse_checks
from pytest_webperf.gate.metrics import CONTENDED_CPU_PERCENT
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import Latency, Snapshot
from pytest_webperf.models.workload import Workload
from pytest_webperf.sampling.contention import foreign_cpu_percent
from pytest_webperf.stats.histogram import Histogram


def measurement(rps: float, cpu_per_req_us: float, foreign: float | None) -> Measurement:
    runs = []
    for i in range(5):
        rate = rps * (1 + 0.005 * (i - 2))
        histogram = Histogram()
        histogram.record_many([1000, 1100])
        requests = int(rate * 5)
        runs.append(
            RunResult(
                repetition=i + 1,
                concurrency=10,
                duration_s=5.0,
                requests=requests,
                errors=0,
                timeouts=0,
                connect_errors=0,
                bytes=0,
                latency=Latency.of(histogram),
                series=tuple(
                    Snapshot(t + 1.0, 1.0, 10, int(rate), 0, 0, 0, 1.0, 1.0, 1.0) for t in range(5)
                ),
                histogram=histogram,
                server_cpu_seconds=requests * cpu_per_req_us * (1 + 0.003 * (i - 2)) / 1e6,
                foreign_cpu_percent=foreign,
            )
        )
    return Measurement("t.py::test[c10]", "GET /hello", "x", 10, Workload(), tuple(runs))


CHECKS = parse_checks("rps:5%,cpu_per_req:5%")


def test_an_rps_drop_on_a_quiet_machine_fails():
    verdict = decide(measurement(700, 100, 2.0), measurement(1000, 100, 1.0), CHECKS)
    assert verdict.status == "regression"
    assert any(r.startswith("rps 1000 -> 700") for r in verdict.reasons)


@pytest.mark.parametrize(("current", "base"), [(60.0, 1.0), (1.0, 60.0)])
def test_an_rps_drop_on_a_contended_run_is_not_judged_and_not_a_pass(current, base):
    verdict = decide(measurement(700, 100, current), measurement(1000, 100, base), CHECKS)
    assert verdict.status == "undecided", verdict  # not checked: never "passed"
    assert not verdict.reasons
    rps = next(c for c in verdict.checks if c["metric"] == "rps")
    assert rps["outcome"] == "contended" and rps["checked"] is False
    assert any("not judged, other processes used" in n for n in verdict.notes)


def test_a_slower_server_is_caught_under_contention_all_the_same():
    verdict = decide(measurement(700, 111, 60.0), measurement(1000, 100, 1.0), CHECKS)
    assert verdict.status == "regression"
    assert any(r.startswith("cpu_per_req") for r in verdict.reasons)
    assert not any(r.startswith("rps") for r in verdict.reasons)


def test_an_ab_run_judges_rps_under_contention_on_its_paired_interval():
    # interleaved pairs put the other load on both sides: measured (benchmarks/gate.py),
    # no false alarm with or without the rule, and rps caught 9/20 +10 % slowdowns
    # only without it; the message says how busy the machine was
    current, base = measurement(700, 100, 60.0), measurement(1000, 100, 1.0)
    verdict = decide(current, base, CHECKS, instances=list(range(5)))
    assert verdict.status == "regression", verdict
    (reason,) = verdict.reasons
    assert reason.startswith("rps 1000 -> 700")
    assert "other processes used 60% of a core during the change (B) and 1% during the" in reason
    assert "which the interleaved pairs' interval includes" in reason
    quiet = decide(measurement(700, 100, 2.0), base, CHECKS, instances=list(range(5)))
    assert not any("other processes" in r for r in quiet.reasons)


def test_unknown_contention_counts_as_quiet():
    verdict = decide(measurement(700, 100, None), measurement(1000, 100, None), CHECKS)
    assert verdict.status == "regression"


def test_contention_threshold_is_a_quarter_core():
    assert CONTENDED_CPU_PERCENT == 25.0
    quiet = measurement(700, 100, CONTENDED_CPU_PERCENT)
    assert decide(quiet, measurement(1000, 100, 0.0), CHECKS).status == "regression"


def test_foreign_cpu_arithmetic():
    assert foreign_cpu_percent(other_s=3.0, server_s=1.0, duration_s=4.0) == 50.0
    assert foreign_cpu_percent(other_s=0.5, server_s=1.0, duration_s=4.0) == 0.0  # clamped
    assert foreign_cpu_percent(other_s=3.0, server_s=None, duration_s=4.0) is None


def test_the_figure_travels_in_the_report():
    run = measurement(1000, 100, 12.5).runs[0]
    assert RunResult.from_dict(run.to_dict()).foreign_cpu_percent == 12.5
    unknown = dataclasses.replace(run, foreign_cpu_percent=None)
    assert unknown.to_dict()["foreign_cpu_percent"] is None
