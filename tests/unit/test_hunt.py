"""What a bisect hunts (``commands/bisect/hunt.py``): a step its test leaves undecided, read against
BAD's change."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.commands.bisect import hunt
from pytest_webperf.commands.bisect.hunt import Hunted


def report(*checks: dict[str, Any]) -> dict[str, Any]:
    return {"tests": [{"nodeid": "t.py::t", "name": "GET /", "verdict": {"checks": list(checks)}}]}


def check(metric: str, change: float, low: float, high: float, outcome: str) -> dict[str, Any]:
    return {
        "check": f"{metric}:5%",
        "metric": metric,
        "change": change,
        "low": low,
        "high": high,
        "outcome": outcome,
    }


# the hunt: BAD +21.0 % (+14.4..+28.0 %)
CPU = Hunted("t.py::t [GET /]", "cpu_per_req:5%", "cpu_per_req", 0.21, 0.144, 0.28)
RPS = Hunted("t.py::t [GET /]", "rps:5%", "rps", -0.21, -0.28, -0.144)


def test_the_hunted_checks_are_the_ones_bad_failed() -> None:
    bad = report(
        check("cpu_per_req", 0.21, 0.144, 0.28, "fail"), check("p95", 0.3, -0.5, 1.0, "undecided")
    )
    assert hunt.hunted(bad) == [CPU]
    assert CPU.describe() == "t.py::t [GET /]: cpu_per_req:5% +21.0% (+14.4..+28.0%)"


@pytest.mark.parametrize(
    ("change", "low", "high", "reading"),
    [
        (0.029, -0.103, 0.161, "good"),  # the two noisy steps: short of +21 %
        (0.0605, -0.014, 0.135, "good"),
        (0.126, -0.04, 0.32, "undecided"),  # a loaded machine's: could be either
        (0.2, 0.05, 0.40, "bad"),  # reaches the effect, excludes none
        (0.14, -0.02, 0.30, "undecided"),  # consistent with both
        (0.3, 0.25, 0.35, "bad"),  # worse than the effect
    ],
)
def test_a_step_is_read_against_the_hunted_effect(
    change: float, low: float, high: float, reading: str
) -> None:
    assert hunt.read(check("cpu_per_req", change, low, high, "undecided"), CPU) == reading
    # where worse is down, mirrored
    assert hunt.read(check("rps", -change, -high, -low, "undecided"), RPS) == reading


@given(
    st.floats(0.01, 2.0),
    st.floats(-1.0, 2.0),
    st.floats(0.0, 2.0),
    st.floats(0.0, 1.0),
)
def test_a_step_is_never_both_good_and_consistent_with_the_effect(
    effect: float, low: float, width: float, at: float
) -> None:
    high = low + width
    change = low + at * width
    hunted = Hunted("t", "cpu_per_req:5%", "cpu_per_req", effect)  # taken as exact
    reading = hunt.read(check("cpu_per_req", change, low, high, "undecided"), hunted)
    if low <= effect <= high:
        assert reading != "good"  # an interval holding the effect never rules it out
    if low <= 0 <= high:
        assert reading != "bad"  # nor one holding no change condemns the commit
    if high < effect:
        assert reading == "good"


def test_a_step_is_bad_if_any_hunted_check_says_so_and_good_if_all_do() -> None:
    both = [CPU, Hunted("t.py::t [GET /]", "p95:10%", "p95", 0.5)]
    step = report(
        check("cpu_per_req", 0.0, -0.1, 0.1, "undecided"),
        {**check("p95", 0.5, 0.2, 0.9, "undecided"), "check": "p95:10%"},
    )
    reading, why = hunt.judge(step, both)
    assert reading == "bad"
    assert (
        "cpu_per_req:5% -10.0..+10.0% against +21.0% (+14.4..+28.0%): credibly short of it" in why
    )
    assert hunt.judge(report(), both)[0] == "undecided"  # the checks are missing
