"""Advice is told apart from failed checks, and said once with the tests it applies to."""

from __future__ import annotations

from pytest_webperf.gate.advice import (
    advice_lines,
    advice_of,
    failure_reasons,
    group_summary_advice,
    is_advice,
)
from pytest_webperf.gate.decide import GENERATOR_BOUND, NO_BASELINE
from pytest_webperf.models.measurement import Measurement, Verdict
from pytest_webperf.models.workload import Workload

BOUND = GENERATOR_BOUND.format(checks="rps")


def test_advice_is_not_a_failure_reason():
    assert is_advice(NO_BASELINE) and is_advice(BOUND)
    assert failure_reasons(["rps -12% (limit -5%)", BOUND, NO_BASELINE]) == ["rps -12% (limit -5%)"]


def test_each_advice_once_with_its_tests():
    advice = [("a [GET /]", NO_BASELINE), ("b [GET /]", NO_BASELINE), ("b [GET /]", BOUND)]
    assert advice_lines(advice) == [
        NO_BASELINE,
        "  applies to 2 measurements: a [GET /], b [GET /]",
        f"b [GET /]: {BOUND}",
    ]


def test_summary_lines_keep_their_order_and_lose_the_repeats():
    advice = [("a [x]", NO_BASELINE), ("b [x]", NO_BASELINE)]
    lines = [
        "table",
        f"a [x]: {NO_BASELINE}",
        "a [x]: p95 improved",
        f"b [x]: {NO_BASELINE}",
        "end",
    ]
    assert group_summary_advice(lines, advice) == [
        "table",
        NO_BASELINE,
        "  applies to 2 measurements: a [x], b [x]",
        "a [x]: p95 improved",
        "end",
    ]


def test_summary_without_advice_is_unchanged():
    assert group_summary_advice(["x", "y"], []) == ["x", "y"]


def test_advice_of_measurements():
    def measurement(nodeid: str, verdict: Verdict | None) -> Measurement:
        return Measurement(nodeid, "GET /", "nginx", 5, Workload(), (), verdict=verdict)

    measurements = [
        measurement("t1", Verdict("regression", ("rps -9%", BOUND))),
        measurement("t2", Verdict("no-baseline", (NO_BASELINE,))),
        measurement("t3", None),
    ]
    assert advice_of(measurements) == [("t1 [GET /]", BOUND), ("t2 [GET /]", NO_BASELINE)]


def test_a_long_list_is_cut():
    advice = [(f"t{i} [x]", NO_BASELINE) for i in range(30)]
    (_, places) = advice_lines(advice)
    assert places.startswith("  applies to 30 measurements: t0 [x], ")
    assert places.endswith("t8 [x], ...")
