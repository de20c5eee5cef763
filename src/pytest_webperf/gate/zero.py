"""A figure that cannot be zero, measured as zero: not measured, never judged.

A server that served requests used CPU to serve them: its CPU per request (and its
CPU %) of a repetition with requests is never 0. A repetition that reads 0 there
did not measure the server, so a relative check on it is held open (undecided: an
A/B run adds pairs, and the verdict is not a pass). Seen as ``cpu_per_req -100.0%
(-100.0%..-100.0%)`` with a pass under load average 9-11, and reproduced: a process
target's CPU comes from psutil in clock ticks (10 ms, ``/proc/PID/stat``), so a run in
which the server used less than a tick reads 0 (a zero on the base's side was
"skipped", on the change's "improved": both passed).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_webperf.gate.metrics import Metric
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
