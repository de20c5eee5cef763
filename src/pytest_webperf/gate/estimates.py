"""How a change and its spread are estimated, for one metric, from the runs of two sides.

Three estimators, one result shape (``Estimate``): repetitions against a stored baseline
(the Welch interval of ``ratio.ratio_change``), pairs of an A/B run (``ratio.paired_change``:
instances as the unit of evidence), and counts as Poisson rates (``rates.rate_ratio``).
``compare`` decides from an ``Estimate``; it never looks at the runs itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_webperf.gate.metrics import Metric
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.stats import distributions, rates
from pytest_webperf.stats import ratio as stats

# The spread of one A/B pair's log ratio of instructions per request, at least, by the
# runtime counted. Fresh CPython processes of the same code sit on a few levels of their
# allocator's state after the start, hundredths of a per cent apart, set by what the
# start did (a script directory listing .git and pytest's files on one side only put the
# sides on different levels in 8 A/As of 8). Two processes a side often share a level,
# and two pairs then agree to a few instructions: an A/A's interval a few thousandths of
# a per cent wide, beside 0. Measured 2026-11-29 (docs/explanation/figures.md, "A counted
# A/A of CPython"): 68 pairs of counted A/As of a stdlib server, 65 within 0.06 % (sd
# 0.021 %, mean -0.021 %, root mean square 0.030 %), 3 at about 1 % (one process's window
# higher: their own spread shows it). The floor, 0.04 %, is above that root mean square,
# with its degrees of freedom. Native code repeats to the instruction: no floor.
LEVELS: Mapping[str, stats.Spread] = {"python": stats.Spread(0.0004**2, 64)}


def levels(*sides: Measurement) -> stats.Spread | None:
    """The floor (``LEVELS``) of the runtimes the sides' repetitions counted, or None."""
    runtimes = {r.counts.runtime for m in sides for r in m.runs if r.counts is not None}
    found = [LEVELS[name] for name in sorted(runtimes) if name in LEVELS]
    return max(found, key=lambda spread: spread.rel_var) if found else None


def run_values(metric: Metric, m: Measurement) -> list[float] | None:
    values = [metric.per_run(r) for r in m.runs]
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values if v is not None]


def measured_runs(metric: Metric, m: Measurement) -> tuple[list[RunResult], list[float]]:
    """The repetitions that measured ``metric``, and their values. A repetition whose
    sampler could not read the server (e.g. its process was not found yet) must not
    switch the check off for the others."""
    kept = [(r, metric.per_run(r)) for r in m.runs]
    runs = [r for r, v in kept if v is not None]
    return runs, [float(v) for _, v in kept if v is not None]


def combined(metric: Metric, m: Measurement) -> float | None:
    values = run_values(metric, m)
    if values is None:
        return None
    if metric.combine == "sum":
        return math.fsum(values)
    if metric.combine == "rate":
        exposure = total_exposure(metric, m)
        return math.fsum(values) / exposure if exposure > 0 else None
    return max(values) if metric.combine == "max" else stats.mean(values)


@dataclass(frozen=True)
class Estimate:
    current: float
    baseline: float
    change: float
    low: float | None
    high: float | None
    p_worse: float
    p_better: float
    counts: tuple[int, int] | None = None  # events (current, baseline) of a count metric
    partial: str = ""  # which repetitions did not measure the metric, if any
    se: float | None = None  # standard error of the log ratio (None: no spread known)
    df: float | None = None


def directed(metric: Metric, est: stats.RatioEstimate) -> tuple[float, float]:
    """(p for "worse", p for "better")."""
    return (est.p_greater, est.p_less) if metric.bad == "up" else (est.p_less, est.p_greater)


def counted_with(m: Measurement) -> set[str]:
    """The callgrind (version and options) a measurement's counted repetitions ran with."""
    return {r.counts.tool for r in m.runs if r.counts is not None}


def level_estimate(metric: Metric, current: Measurement, baseline: Measurement) -> Estimate | str:
    if metric.counted and counted_with(current) != counted_with(baseline):
        then, now = sorted(counted_with(baseline)), sorted(counted_with(current))
        return (
            f"the baseline was counted by {', '.join(then) or 'nothing'}, this run by "
            f"{', '.join(now) or 'nothing'}: counts depend on Valgrind's version and "
            "options, so they are not compared (--webperf-save makes a new baseline)"
        )
    (runs, xs), (base_runs, ys) = measured_runs(metric, current), measured_runs(metric, baseline)
    if not xs or not ys:
        side = "this run" if not xs else "the baseline"
        return f"{metric.label} was not measured in {side}"
    if stats.mean(ys) <= 0:
        return f"the baseline's {metric.label} is 0, no relative change exists"
    series = metric.series
    pair = levels(current, baseline) if metric.levelled else None
    process = None if pair is None else stats.Spread(pair.rel_var / 2, pair.df)  # half a pair's
    est = stats.ratio_change(
        xs,
        ys,
        current_series=[series(r) for r in runs] if series else (),
        baseline_series=[series(r) for r in base_runs] if series else (),
        current_instances=[r.instance for r in runs],
        baseline_instances=[r.instance for r in base_runs],
        floor=process,
    )
    partial = [
        f"{len(found)} of {len(m.runs)} repetitions of {side}"
        for found, m, side in ((runs, current, "this run"), (base_runs, baseline, "the baseline"))
        if len(found) < len(m.runs)
    ]
    return Estimate(
        stats.mean(xs),
        stats.mean(ys),
        est.change,
        est.low,
        est.high,
        *directed(metric, est),
        partial=("; measured in " + " and ".join(partial) if partial else ""),
        se=est.se,
        df=est.df,
    )


def paired_estimate(
    metric: Metric, change: Measurement, base: Measurement, instances: Sequence[int]
) -> Estimate | str:
    """B against A pair by pair (``change.runs[i]`` against ``base.runs[i]``)."""
    pairs = [
        (metric.per_run(b), metric.per_run(a), instance)
        for b, a, instance in zip(change.runs, base.runs, instances, strict=False)
    ]
    kept = [(float(b), float(a), i) for b, a, i in pairs if b is not None and a is not None]
    if not kept:
        return f"{metric.label} was not measured in both sides of any pair"
    if any(a <= 0 for _, a, _ in kept) or any(b < 0 for b, _, _ in kept):
        return f"the base's {metric.label} is 0 in a pair, no relative change exists"
    if any(b == 0 for b, _, _ in kept):
        bs, as_ = [b for b, _, _ in kept], [a for _, a, _ in kept]
        return Estimate(stats.mean(bs), stats.mean(as_), -1.0, -1.0, -1.0, 0.0, 1.0)
    floor = None
    if metric.series is not None:
        series = metric.series
        spreads = [
            stats.within_run_spread([series(r) for r in side.runs]) for side in (change, base)
        ]
        if all(s is not None for s in spreads):
            floor = stats.Spread(
                sum(s.rel_var for s in spreads if s), min(s.df for s in spreads if s)
            )
    elif metric.levelled:
        floor = levels(change, base)
    est = stats.paired_change(
        [math.log(b / a) for b, a, _ in kept], [i for _, _, i in kept], floor=floor
    )
    skipped = len(pairs) - len(kept)
    return Estimate(
        stats.mean([b for b, _, _ in kept]),
        stats.mean([a for _, a, _ in kept]),
        est.change,
        est.low,
        est.high,
        *directed(metric, est),
        partial=f"; {skipped} of {len(pairs)} pairs not measured" if skipped else "",
        se=est.se,
        df=est.df,
    )


def total_exposure(metric: Metric, m: Measurement) -> float:
    return math.fsum(metric.exposure(r) for r in m.runs)


def count_estimate(metric: Metric, current: Measurement, baseline: Measurement) -> Estimate | str:
    xs, ys = run_values(metric, current), run_values(metric, baseline)
    if xs is None or ys is None:
        side = "this run" if xs is None else "the baseline"
        return f"{metric.label} was not measured in {side}"
    exposure, base_exposure = total_exposure(metric, current), total_exposure(metric, baseline)
    if exposure <= 0 or base_exposure <= 0:
        return "nothing was sent" + (" in this run" if exposure <= 0 else " in the baseline")
    events, base_events = round(math.fsum(xs)), round(math.fsum(ys))
    est = rates.rate_ratio(events, exposure, base_events, base_exposure)
    return Estimate(
        events / exposure,
        base_events / base_exposure,
        est.change,
        est.low,
        est.high,
        est.p_greater,
        est.p_less,
        (events, base_events),
    )


def interval(est: Estimate, confidence: float) -> tuple[float | None, float | None]:
    """The two-sided interval at ``confidence`` (the estimators compute 95 %)."""
    if est.se is None or est.df is None or est.counts is not None:
        return est.low, est.high
    if est.se == 0:
        return est.change, est.change
    q = distributions.t_ppf(0.5 + confidence / 2, est.df)
    centre = math.log1p(est.change)
    return math.expm1(centre - q * est.se), math.expm1(centre + q * est.se)
