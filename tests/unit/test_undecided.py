"""What would decide a check a run left undecided, and how a test with one reads in
pytest's terms (``gate/undecided.py``, ``run/outcome.py``)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.gate.outcome import POWER
from pytest_webperf.gate.undecided import Evidence, units_needed, would_decide
from pytest_webperf.models.measurement import Measurement, Verdict
from pytest_webperf.models.workload import Workload
from pytest_webperf.run import outcome
from pytest_webperf.stats import ratio

ALPHA = 0.025


@given(
    se=st.floats(0.001, 2.0),
    units=st.integers(2, 200),
    threshold=st.floats(0.005, 0.5),
)
def test_the_pairs_needed_would_detect_the_threshold(
    se: float, units: int, threshold: float
) -> None:
    needed = units_needed(se, units, threshold, ALPHA, POWER)
    assert needed > units
    # se shrinks as 1/sqrt(n): at the pairs needed, a large-sample test detects it
    at_needed = se * math.sqrt(units / needed)
    assert ratio.detectable_change(at_needed, None, alpha=ALPHA, power=POWER) <= threshold + 1e-9


@given(se=st.floats(0.001, 1.0), units=st.integers(2, 50))
def test_more_spread_needs_more_pairs(se: float, units: int) -> None:
    assert units_needed(2 * se, units, 0.05, ALPHA, POWER) >= units_needed(
        se, units, 0.05, ALPHA, POWER
    )


def test_a_countable_cpu_check_names_counting_first_then_the_pairs_and_time() -> None:
    said = would_decide(
        "cpu_per_req",
        se=0.05,
        threshold=0.05,
        alpha=ALPHA,
        power=POWER,
        evidence=Evidence("pairs", 3, 15.0, countable=True),
        busy_percent=10.0,
        busy_limit=25.0,
    )
    assert said.startswith("would decide: counting it (count=True, or --webperf-count=auto)")
    assert "; or about " in said and " pairs (3 so far, ~" in said and "at this run's pace" in said
    assert "quieter" not in said


def test_a_busy_machine_is_said_and_counting_is_not_offered_for_latency() -> None:
    said = would_decide(
        "p95",
        se=0.5,
        threshold=0.2,
        alpha=ALPHA,
        power=POWER,
        evidence=Evidence("repetitions", 3, None, countable=True),
        busy_percent=122.0,
        busy_limit=25.0,
    )
    assert "counting" not in said
    assert "a quieter machine (other processes used 122% of a core)" in said


def test_hopeless_spread_says_so_instead_of_a_number_no_run_takes() -> None:
    said = would_decide(
        "rps",
        se=3.0,
        threshold=0.02,
        alpha=ALPHA,
        power=POWER,
        evidence=Evidence("pairs", 2, 11.0),
        busy_percent=0.0,
        busy_limit=25.0,
    )
    assert "more pairs than a run can take (about " in said


def measured(status: str, checks: list[dict[str, object]]) -> Measurement:
    return Measurement(
        "t.py::test[c4]",
        "GET /",
        "app",
        4,
        Workload(),
        (),
        verdict=Verdict(status, checks=tuple(checks)),  # type: ignore[arg-type]
    )


def test_a_test_with_a_check_not_checked_is_undecided_with_its_line() -> None:
    unchecked = {"message": "cpu_per_req: too noisy ...; would decide: ...", "checked": False}
    checked = {"message": "errors ok", "checked": True}
    lines = outcome.undecided_lines([measured("undecided", [checked, unchecked])])
    assert lines == ["[GET / on app] cpu_per_req: too noisy ...; would decide: ..."]
    assert outcome.undecided_lines([measured("pass", [checked])]) == []
    # a failed test fails: its open checks do not make it undecided
    assert outcome.undecided_lines([measured("regression", [unchecked])]) == []
    # verdicts stored before "checked" existed read as checked
    assert outcome.undecided_lines([measured("pass", [{"message": "old"}])]) == []
