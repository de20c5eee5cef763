"""What would decide a check a run left undecided, said on the check's own line: the
pairs (or repetitions) and the time the spread this run saw needs for the threshold;
counting, where the load and the target can be counted and the check is a CPU cost;
or a quieter machine, when other processes took the CPU.

And where counting may decide it (``--webperf-count=auto``), how: the same load is
counted at the CPU check's threshold on ``instructions_per_req`` (``counting_checks``),
and the CPU check takes the counted check's outcome (``settle``), said so on its line.

The pairs needed come from the standard error of the log ratio, which shrinks as
``1/sqrt(n)``: the ``se`` at which the gate's one-sided test at level ``alpha`` catches
a change of the threshold with the gate's power is ``log1p(threshold) / (z[1-alpha] +
z[power])``, so ``n * (se / that)**2`` pairs would reach it (normal quantiles: the
t-quantiles of a few pairs are what make "could detect" large, and they shrink as pairs
are added). An estimate from the spread seen so far, said as "about".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

# Beyond this many units a run cannot be asked to add them: say so, and what else helps.
MOST_UNITS = 1000
CPU_COST = frozenset({"cpu_per_req"})  # what counting measures exactly (instructions)


@dataclass(frozen=True)
class Evidence:
    """What one run spent on its evidence, and what else could settle it."""

    unit: str = "repetitions"  # "pairs" in an A/B run
    units: int = 0  # pairs, or repetitions of this run, so far
    seconds_per_unit: float | None = None  # wall time one took here
    countable: bool = False  # the load and the target could be counted (count=True)


def units_needed(se: float, units: int, threshold: float, alpha: float, power: float) -> int:
    """The pairs (or repetitions) at which this run's spread would detect ``threshold``."""
    wanted = math.log1p(threshold) / (NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power))
    return max(units + 1, math.ceil(units * (se / wanted) ** 2))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def would_decide(
    metric: str,
    *,
    se: float | None,
    threshold: float,
    alpha: float,
    power: float,
    evidence: Evidence,
    busy_percent: float,
    busy_limit: float,
) -> str:
    """``would decide: ...``: what this check needs, most useful first."""
    ways: list[str] = []
    if metric in CPU_COST and evidence.countable:
        ways.append(
            "counting it (count=True, or --webperf-count=auto): instructions per request "
            "do not move with the machine's load"
        )
    if busy_percent > busy_limit:
        ways.append(f"a quieter machine (other processes used {busy_percent:.0f}% of a core)")
    if se is not None and se > 0 and evidence.units > 0:
        needed = units_needed(se, evidence.units, threshold, alpha, power)
        if needed > MOST_UNITS:
            ways.append(
                f"more {evidence.unit} than a run can take (about {needed:,} for this spread)"
            )
        else:
            time = (
                ""
                if evidence.seconds_per_unit is None
                else f", ~{_duration(needed * evidence.seconds_per_unit)} at this run's pace"
            )
            ways.append(f"about {needed} {evidence.unit} ({evidence.units} so far{time})")
    return "would decide: " + "; or ".join(ways) if ways else ""


COUNTED_METRIC = "instructions_per_req"  # what counting measures of a CPU cost


def to_settle(checks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The CPU-cost checks of a verdict that timing did not check (``checked`` false)."""
    return [c for c in checks if c.get("metric") in CPU_COST and c.get("checked") is False]


def counting_checks(checks: Sequence[Mapping[str, Any]]) -> str:
    """The checks a counted measurement settles them with: ``instructions_per_req`` at
    the tightest of their thresholds, and the error limit (``errors:50%``)."""
    thresholds = [float(c["threshold"]) for c in to_settle(checks) if c.get("threshold")]
    percent = min(thresholds, default=0.05) * 100
    return f"{COUNTED_METRIC}:{percent:g}%,errors:50%"
