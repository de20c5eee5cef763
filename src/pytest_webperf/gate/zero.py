"""A figure that cannot be zero, measured as zero: not measured, never judged; and a figure
that may be zero (no allocation, no system call per request) and was zero before.

A server that served requests used CPU to serve them: its CPU per request (and its
CPU %) of a repetition with requests is never 0. A repetition that reads 0 there
did not measure the server, so a relative check on it is held open (undecided: an
A/B run adds pairs, and the verdict is not a pass). Seen as ``cpu_per_req -100.0%
(-100.0%..-100.0%)`` with a pass under load average 9-11, and reproduced: a process
target's CPU comes from psutil in clock ticks (10 ms, ``/proc/PID/stat``), so a run in
which the server used less than a tick reads 0 (a zero on the base's side was
"skipped", on the change's "improved": both passed).

A count per request that was 0 on the base's side (a Go server makes no libc allocation)
has no relative change: 0 -> 1 is not +N %. ``from_none`` judges it as what it is: 0 on
both sides passes, more than 0 in every repetition of the change fails (a new kind of
cost), a mix of both is undecided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_webperf.gate.estimates import measured_runs
from pytest_webperf.gate.grammar import RelativeCheck
from pytest_webperf.gate.metrics import Metric
from pytest_webperf.gate.outcome import CheckResult, Outcome
from pytest_webperf.models.measurement import Measurement

# the server's CPU: never 0 in a repetition that served requests
NONZERO_METRICS = frozenset({"cpu_per_req", "cpu"})


def zero_runs(metric: Metric, measurement: Measurement) -> int:
    """How many repetitions served requests yet read ``metric`` as exactly 0."""
    if metric.name not in NONZERO_METRICS or metric.endpoint is not None:
        return 0
    return sum(1 for r in measurement.runs if r.requests > 0 and metric.per_run(r) == 0)


def zero_figure(
    metric: Metric, current: Measurement, baseline: Measurement, sides: Sequence[str]
) -> str | None:
    """Why a relative check on ``metric`` cannot be judged (a side's repetitions read
    0 with requests served), or None."""
    found = [
        f"{zero} of {len(m.runs)} repetition(s) of {side}"
        for m, side in zip((current, baseline), sides, strict=True)
        if (zero := zero_runs(metric, m))
    ]
    if not found:
        return None
    return (
        f"{metric.label}: not measured: {' and '.join(found)} read 0 with requests "
        "served (the server's CPU was not sampled); not judged, never a pass"
    )


def from_none(
    check: RelativeCheck,
    metric: Metric,
    current: Measurement,
    baseline: Measurement,
    sides: Sequence[str],
) -> CheckResult | None:
    """A relative check on a figure that was 0 in every repetition of the baseline (the
    base): decided without a ratio; None when the baseline was not all 0."""
    if not metric.may_be_zero:
        return None
    _, before = measured_runs(metric, baseline)
    _, now = measured_runs(metric, current)
    if not before or not now or any(v != 0 for v in before):
        return None
    shown = f"{metric.label} 0 -> {max(now):.4g} per request"

    def result(outcome: Outcome, message: str) -> CheckResult:
        return CheckResult(
            str(check),
            metric.name,
            outcome,
            message,
            endpoint=check.endpoint,
            current=max(now),
            baseline=0.0,
            change=math.inf if outcome == "fail" else None,
            threshold=check.percent / 100,
        )

    if all(v == 0 for v in now):
        return result("pass", f"{metric.label} 0 -> 0 per request")
    if all(v > 0 for v in now):
        return result(
            "fail", f"{shown}: none in {sides[1]}, some in every repetition of {sides[0]}"
        )
    return result(
        "undecided", f"{shown}: none in {sides[1]}, some in part of {sides[0]}'s repetitions only"
    )
