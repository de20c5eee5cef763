"""A figure that cannot be zero (the server's CPU with requests served), read as zero:
the relative check on it is held open, never a pass (zerofigure.py, compare.evaluate)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.unit.test_compare import make, make_run

from pytest_webperf.gate.decide import decide
from pytest_webperf.gate.grammar import parse_checks
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.gate.zero import zero_figure, zero_runs


def test_a_side_whose_server_cpu_read_zero_is_not_a_pass() -> None:
    # the bug seen under load: B's server CPU read 0 in every pair, -100 % "improved"
    base = make([make_run(1000, cpu_us=200.0, rep=i) for i in range(3)])
    change = make([make_run(1000, cpu_us=0.0, rep=i) for i in range(3)])
    verdict = decide(change, base, parse_checks("cpu_per_req:10%"), instances=[0, 1, 2])
    assert verdict.status == "undecided"
    (check,) = verdict.checks
    assert check["outcome"] == "undecided" and check["metric"] == "cpu_per_req"
    assert "not measured: 3 of 3 repetition(s) of the change (B) read 0" in check["message"]


def test_one_zero_repetition_of_the_baseline_is_enough_to_hold_the_check_open() -> None:
    base = make([make_run(1000, cpu_us=c, rep=i) for i, c in enumerate((200.0, 0.0, 200.0))])
    change = make([make_run(1000, cpu_us=260.0, rep=i) for i in range(3)])
    verdict = decide(change, base, parse_checks("cpu_per_req:10%"))
    assert verdict.status == "undecided"
    assert [c["outcome"] for c in verdict.checks] == ["undecided"]
    assert "1 of 3 repetition(s) of the baseline read 0" in verdict.checks[0]["message"]


def test_other_checks_are_still_judged() -> None:
    base = make([make_run(1000, cpu_us=200.0, rep=i) for i in range(3)])
    change = make([make_run(500, cpu_us=0.0, rep=i, noise=(0.01, -0.01)) for i in range(3)])
    verdict = decide(change, base, parse_checks("rps:5%,cpu_per_req:10%"))
    assert verdict.status == "regression"
    assert [c["outcome"] for c in verdict.checks] == ["fail", "undecided"]


def test_a_repetition_without_requests_or_cpu_figure_is_not_a_zero() -> None:
    cpu_per_req = METRICS["cpu_per_req"]
    assert zero_runs(cpu_per_req, make([make_run(0, cpu_us=0.0)])) == 0
    assert zero_runs(cpu_per_req, make([make_run(1000, cpu_us=None)])) == 0
    assert zero_runs(METRICS["rps"], make([make_run(1000, cpu_us=0.0)])) == 0


@given(st.lists(st.floats(min_value=0.01, max_value=1e4), min_size=1, max_size=6))
def test_measured_figures_are_never_held_open(cpus: list[float]) -> None:
    runs = make([make_run(100, seconds=2, cpu_us=c, rep=i) for i, c in enumerate(cpus)])
    assert zero_figure(METRICS["cpu_per_req"], runs, runs, ("B", "A")) is None
