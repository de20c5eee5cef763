"""``capacity`` in a check: the rate a ``webperf.capacity`` search found, against the
stored baseline's search or, in an A/B run, the base's (searched interleaved with it).

A search states its answer as an interval (the last rate that met the SLO, the first
that broke it), so a change is an interval too: this run's capacity over the
baseline's lies between ``low / base_high`` and ``high / base_low``. ``capacity:N%``
fails when even the high end is more than N % down, passes when the low end is not,
and is undecided in between (a finer ``tolerance=`` narrows both intervals).
``capacity>V`` (and the other limits) holds this run's rate (0 when no rate met the
SLO) against V.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_webperf.gate.grammar import AbsoluteCheck, Check
from pytest_webperf.models.capacity import Capacity
from pytest_webperf.models.measurement import Measurement

USABLE = ("found", "at-limit")


@dataclass(frozen=True)
class Judged:
    """A capacity check's outcome (``decide.CheckResult`` takes these fields)."""

    outcome: str
    message: str
    current: float | None = None
    baseline: float | None = None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    threshold: float | None = None


def _shown(found: Capacity) -> str:
    if found.rate is None:
        return f"none ({found.status}: {found.reason})"
    high = "and beyond" if found.high is None else f"to {found.high:,.0f}"
    return f"{found.rate:,.0f} req/s ({found.low:,.0f} {high})"


def judge(
    check: Check, current: Measurement, baseline: Measurement | None, *, ab: bool
) -> Judged | None:
    """``check`` on ``capacity`` for ``current``; None when it is not a capacity check."""
    if check.metric != "capacity":
        return None
    found = current.capacity
    if found is None:
        return Judged("skipped", f"{check}: skipped, no capacity search in this measurement")
    if isinstance(check, AbsoluteCheck):
        value = found.rate or 0.0
        if check.holds(value):
            return Judged("pass", f"capacity {_shown(found)} within {check}", current=value)
        return Judged("fail", f"capacity {_shown(found)} breaks the limit {check}", current=value)
    base = current.base_capacity if ab else (baseline.capacity if baseline else None)
    words = ("the change (B)", "the base (A)") if ab else ("this run", "the baseline")
    if base is None:
        return None if baseline is None and not ab else _skip(check, f"{words[1]} has none")
    if found.status == "generator-bound" or base.status == "generator-bound":
        return Judged(
            "generator-bound",
            f"{check}: not judged, a search was generator-bound ({words[0]}: "
            f"{_shown(found)}; {words[1]}: {_shown(base)})",
        )
    if found.status not in USABLE or base.status not in USABLE:
        return _skip(check, f"{words[0]}: {_shown(found)}; {words[1]}: {_shown(base)}")
    assert found.low is not None and base.low is not None and found.rate and base.rate
    limit = check.percent / 100
    low = found.low / (base.high or math.inf) - 1
    high = (found.high or math.inf) / base.low - 1
    change = found.rate / base.rate - 1
    said = (
        f"capacity {_shown(found)} against {words[1]}'s {_shown(base)}: {change:+.1%} "
        f"(between {low:+.1%} and {high:+.1%})"
    )
    figures = {
        "current": found.rate,
        "baseline": base.rate,
        "change": change,
        "low": low,
        "high": high if math.isfinite(high) else None,
        "threshold": limit,
    }
    if high < -limit:
        return Judged("fail", f"{said}, beyond -{check.percent:g}%", **figures)
    if low > 0:
        return Judged("improved", f"{said}: higher", **figures)
    if low >= -limit:
        return Judged("pass", f"{said}, within -{check.percent:g}%", **figures)
    return Judged(
        "undecided",
        f"{said}: may be down by more than {check.percent:g}% (a finer tolerance= decides)",
        **figures,
    )


def _skip(check: Check, why: str) -> Judged:
    return Judged("skipped", f"{check}: skipped, {why}")
