"""``capacity`` checks (``gate/capacity.py`` through ``decide.decide``): a search's
answer is an interval, so the change is one: fail only when even its best end is
beyond the limit; generator-bound searches are never compared."""

from __future__ import annotations

import pytest

from pytest_webperf.gate import decide
from pytest_webperf.gate.grammar import parse_checks
from pytest_webperf.models.capacity import Capacity, Probe
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.models.workload import Workload


def found(low: float, high: float | None, status: str = "found") -> Capacity:
    rate = low if status in ("found", "at-limit") else None
    return Capacity(status, rate, low, high, "p99_ms<100", (Probe(low, "pass"),))  # type: ignore[arg-type]


def measured(capacity: Capacity | None, base: Capacity | None = None) -> Measurement:
    return Measurement(
        nodeid="t",
        name="capacity of GET /",
        server="s",
        concurrency=1,
        workload=Workload(path="/"),
        runs=(),
        capacity=capacity,
        base_capacity=base,
    )


def outcome(current: Capacity | None, baseline: Capacity | None, check: str = "capacity:10%"):
    (result,) = decide.evaluate(measured(current), measured(baseline), parse_checks(check))
    return result


@pytest.mark.parametrize(
    ("current", "baseline", "expected"),
    [
        (found(200, 210), found(400, 420), "fail"),  # -52 %..-48 %
        (found(400, 420), found(400, 420), "pass"),  # -5 %..+5 %
        (found(360, 420), found(400, 420), "undecided"),  # -14.3 %..+5 %
        (found(500, 520), found(400, 420), "improved"),
        (found(200, None, "at-limit"), found(400, 420), "undecided"),  # may be anything above
        (found(200, 210, "generator-bound"), found(400, 420), "generator-bound"),
        (found(200, 210, "below-start"), found(400, 420), "skipped"),
    ],
)
def test_the_change_is_an_interval(current: Capacity, baseline: Capacity, expected: str) -> None:
    result = outcome(current, baseline)
    assert result.outcome == expected, result.message
    assert result.metric == "capacity"


def test_the_figures_and_the_words() -> None:
    result = outcome(found(200, 210), found(400, 420))
    assert result.current == 200 and result.baseline == 400 and result.change == -0.5
    assert result.low == pytest.approx(200 / 420 - 1) and result.high == pytest.approx(-0.475)
    assert result.message == (
        "capacity 200 req/s (200 to 210) against the baseline's 400 req/s (400 to 420): "
        "-50.0% (between -52.4% and -47.5%), beyond -10%"
    )


def test_ab_reads_the_base_search_and_a_limit_reads_the_rate() -> None:
    current = measured(found(200, 210), found(400, 420))
    (result,) = decide.evaluate(
        current, current, parse_checks("capacity:10%"), instances=(0,), look=1
    )
    assert result.outcome == "fail" and "the base (A)'s 400 req/s" in result.message
    (limit,) = decide.evaluate(current, None, parse_checks("capacity>300"))
    assert limit.outcome == "fail" and limit.current == 200
    nothing = measured(found(1, 2, "below-start"))
    (none,) = decide.evaluate(nothing, None, parse_checks("capacity>0"))
    assert none.outcome == "fail" and none.current == 0


def test_an_ordinary_measurement_has_no_capacity_to_check() -> None:
    (result,) = decide.evaluate(measured(None), measured(None), parse_checks("capacity:5%"))
    assert result.outcome == "skipped" and "no capacity search" in result.message
    assert decide.evaluate(measured(found(1, 2)), None, parse_checks("capacity:5%")) == ()


def test_a_search_is_saved_and_read_back_with_its_measurement() -> None:
    saved = measured(found(200, 210), found(400, 420))
    assert Measurement.from_dict(saved.to_dict()) == saved
    assert "capacity" not in measured(None).to_dict()  # an ordinary measurement as before
