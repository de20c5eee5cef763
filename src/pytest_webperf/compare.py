"""The one place a verdict is decided, from parsed checks (``checks``) on the metric table
(``metrics``).

Grammar of ``--webperf-compare-fail`` (comma-separated, spaces allowed; parsed in ``checks``)::

    METRIC:N%        relative to the baseline: fail when METRIC got worse by more
                     than N %, credibly (rps:5%, p95:10%, cpu_per_req:5%). The bad
                     direction is known per metric; a sign is optional but must
                     agree (rps:-5%, p95:+10%).
    METRIC<V, <=, >, >=   an absolute limit on the current run, baseline or not
                     (p99_ms<500, error_rate<0.01, rss_mb<512, rps>1000).
    COUNT:N          for the count metrics (errors, timeouts, lost, dup), shorthand
                     for COUNT<=N: errors:0 means the current run (all repetitions
                     together) must have no failed request at all; lost:0,dup:0 that
                     QoS 2 kept its promise (every message once).

How a relative check decides (see ``stats``): the change of the mean over
repetitions, ``mean(current) / mean(baseline) - 1``, and its Welch t-interval on the
log scale, with each side's spread the larger of the between-repetition spread and
the within-run spread from the per-second series. A check fails only when the
change is beyond the threshold in the bad direction AND the interval at
``confidence`` (default 95 %) lies wholly on the bad side of 0: the one-sided test for
"worse" is significant at (1 - confidence) / 2 = 2.5 %. So a pure-noise run fails
a check at most 2.5 % of the time, and far less when the noise is small against
the threshold (then the threshold, not the test, is what noise must cross).
Measured by the simulation in tests/unit/test_compare.py (5,000 seeded trials,
repetitions with 5 % CV, rps:5%): 5 vs 5 repetitions, 1.8 % false alarms and 81 %
of 10 % drops caught (26 % of 5 % drops); 3 vs 3, 1.6 % and 42 %. The four default
checks together: 3.9 % false alarms per test at that noise, less on a quieter
machine. Count metrics (errors, timeouts) compare rates per request with an exact
Poisson rate test, so one stray error never fails a gate but a systematic rise
does. Improvements beyond the threshold become notes, never failures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pytest_webperf import stats
from pytest_webperf.checks import DEFAULT_CHECKS, AbsoluteCheck, Check, RelativeCheck, num
from pytest_webperf.metrics import (
    CONTENDED_CPU_PERCENT,
    METRICS,
    Metric,
    foreign_cpu,
    requests_exposure,
)
from pytest_webperf.models import Measurement, RunResult, Status, Verdict

NO_BASELINE = "no baseline (run with --webperf-save)"
GENERATOR_BOUND = (
    "generator-bound: the load generator, not the server, was the bottleneck, so {checks} "
    "measured the generator; give it more processes (--webperf-workers=N), use fewer users "
    "(--webperf-concurrency), or limit the target's CPU so that the server saturates first"
)


Outcome = Literal[
    "pass", "fail", "improved", "not-credible", "skipped", "generator-bound", "contended"
]


@dataclass(frozen=True)
class CheckResult:
    """How one check came out, with the numbers a report shows."""

    check: str
    metric: str
    outcome: Outcome
    message: str
    current: float | None = None
    baseline: float | None = None
    change: float | None = None  # relative, -0.162 for -16.2 %
    low: float | None = None
    high: float | None = None
    p_value: float | None = None  # one-sided, for "worse"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(value: float, unit: str) -> str:
    text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{text}{unit}" if unit else text


def _pct(change: float) -> str:
    return "+inf%" if math.isinf(change) else f"{change * 100:+.1f}%"


def _values(metric: Metric, m: Measurement) -> list[float] | None:
    values = [metric.per_run(r) for r in m.runs]
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values if v is not None]


def _measured_runs(metric: Metric, m: Measurement) -> tuple[list[RunResult], list[float]]:
    """The repetitions that measured ``metric``, and their values. A repetition whose
    sampler could not read the server (e.g. its process was not found yet) must not
    switch the check off for the others."""
    kept = [(r, metric.per_run(r)) for r in m.runs]
    runs = [r for r, v in kept if v is not None]
    return runs, [float(v) for _, v in kept if v is not None]


def _combined(metric: Metric, m: Measurement) -> float | None:
    values = _values(metric, m)
    if values is None:
        return None
    if metric.combine == "sum":
        return math.fsum(values)
    if metric.combine == "rate":
        exposure = _exposure(metric, m)
        return math.fsum(values) / exposure if exposure > 0 else None
    return max(values) if metric.combine == "max" else stats.mean(values)


def _skipped(check: Check, metric: Metric, why: str) -> CheckResult:
    return CheckResult(str(check), metric.name, "skipped", f"{check}: skipped, {why}")


def _absolute(check: AbsoluteCheck, current: Measurement) -> CheckResult:
    metric = METRICS[check.metric]
    value = _combined(metric, current)
    if value is None:
        return _skipped(check, metric, f"{metric.name} was not measured in this run")
    shown = _fmt(value, "" if metric.combine == "rate" else metric.unit)
    if check.holds(value):
        return CheckResult(
            str(check),
            metric.name,
            "pass",
            f"{metric.limit_name} {shown} within {check}",
            current=value,
        )
    return CheckResult(
        str(check),
        metric.name,
        "fail",
        f"{metric.limit_name} {shown} breaks the limit {check}",
        current=value,
    )


@dataclass(frozen=True)
class _Estimate:
    current: float
    baseline: float
    change: float
    low: float | None
    high: float | None
    p_worse: float
    p_better: float
    counts: tuple[int, int] | None = None  # events (current, baseline) of a count metric
    partial: str = ""  # which repetitions did not measure the metric, if any


def _level_estimate(
    metric: Metric, current: Measurement, baseline: Measurement, confidence: float
) -> _Estimate | str:
    (runs, xs), (base_runs, ys) = _measured_runs(metric, current), _measured_runs(metric, baseline)
    if not xs or not ys:
        side = "this run" if not xs else "the baseline"
        return f"{metric.name} was not measured in {side}"
    if stats.mean(ys) <= 0:
        return f"the baseline's {metric.name} is 0, no relative change exists"
    series = metric.series
    est = stats.ratio_change(
        xs,
        ys,
        confidence=confidence,
        current_series=[series(r) for r in runs] if series else (),
        baseline_series=[series(r) for r in base_runs] if series else (),
    )
    worse, better = (
        (est.p_greater, est.p_less) if metric.bad == "up" else (est.p_less, est.p_greater)
    )
    partial = [
        f"{len(found)} of {len(m.runs)} repetitions of {side}"
        for found, m, side in ((runs, current, "this run"), (base_runs, baseline, "the baseline"))
        if len(found) < len(m.runs)
    ]
    return _Estimate(
        stats.mean(xs),
        stats.mean(ys),
        est.change,
        est.low,
        est.high,
        worse,
        better,
        partial=("; measured in " + " and ".join(partial) if partial else ""),
    )


def _exposure(metric: Metric, m: Measurement) -> float:
    return math.fsum(metric.exposure(r) for r in m.runs)


def _count_estimate(
    metric: Metric, current: Measurement, baseline: Measurement, confidence: float
) -> _Estimate | str:
    xs, ys = _values(metric, current), _values(metric, baseline)
    if xs is None or ys is None:
        return f"{metric.name} was not measured in {'this run' if xs is None else 'the baseline'}"
    exposure, base_exposure = _exposure(metric, current), _exposure(metric, baseline)
    if exposure <= 0 or base_exposure <= 0:
        return "nothing was sent" + (" in this run" if exposure <= 0 else " in the baseline")
    events, base_events = round(math.fsum(xs)), round(math.fsum(ys))
    est = stats.rate_ratio(events, exposure, base_events, base_exposure, confidence=confidence)
    return _Estimate(
        events / exposure,
        base_events / base_exposure,
        est.change,
        est.low,
        est.high,
        est.p_greater,
        est.p_less,
        (events, base_events),
    )


def _relative(
    check: RelativeCheck,
    current: Measurement,
    baseline: Measurement,
    confidence: float,
    generator_bound: bool,
) -> CheckResult:
    metric = METRICS[check.metric]
    estimator = _count_estimate if metric.count else _level_estimate
    est = estimator(metric, current, baseline, confidence)
    if isinstance(est, str):
        return _skipped(check, metric, est)
    sign = 1 if metric.bad == "up" else -1
    limit = check.percent / 100
    alpha = (1 - confidence) / 2
    has_interval = est.low is not None and est.high is not None
    unit = "" if metric.count else metric.unit
    ci = (
        f", {confidence * 100:g}% CI {_pct(est.low)}..{_pct(est.high)}"  # type: ignore[arg-type]
        if has_interval
        else ""
    )
    if est.counts is not None:
        shown = (
            f"{est.counts[1]} -> {est.counts[0]} ({est.baseline:.3%} -> {est.current:.3%}"
            f" of {'requests' if metric.exposure is requests_exposure else 'messages'})"
        )
    else:
        shown = f"{_fmt(est.baseline, unit)} -> {_fmt(est.current, unit)}"
    line = f"{metric.name} {shown} ({_pct(est.change)}{ci}{est.partial})"
    bound = f"{'+' if sign > 0 else '-'}{num(check.percent)}%"
    numbers = dict(
        check=str(check),
        metric=metric.name,
        current=est.current,
        baseline=est.baseline,
        change=est.change,
        low=est.low,
        high=est.high,
        p_value=est.p_worse,
    )

    def result(outcome: Outcome, message: str) -> CheckResult:
        return CheckResult(outcome=outcome, message=message, **numbers)  # type: ignore[arg-type]

    if generator_bound and metric.throughput:
        return result(
            "generator-bound", f"{line}: not a measure of the server (generator-bound run)"
        )
    busy = max(foreign_cpu(current), foreign_cpu(baseline))
    if metric.load_sensitive and busy > CONTENDED_CPU_PERCENT and sign * est.change > limit:
        return result(
            "contended",
            (
                f"{line}: not judged, other processes used {foreign_cpu(current):.0f}% of a "
                f"core during this run and {foreign_cpu(baseline):.0f}% during the baseline's "
                f"(limit {CONTENDED_CPU_PERCENT:g}%): rps and latency followed the machine, not "
                "the server; cpu_per_req is still judged"
            ),
        )
    if sign * est.change > limit:
        if not has_interval:
            return result(
                "fail",
                f"{line} beyond {bound} (one repetition per side and no "
                "per-second series: the threshold alone decided; use "
                "--webperf-repeat=3 or more)",
            )
        if est.p_worse < alpha:
            return result("fail", f"{line} beyond {bound}")
        return result(
            "not-credible",
            f"{line} beyond {bound} but within the noise of the two runs: not failed",
        )
    if -sign * est.change > limit and (not has_interval or est.p_better < alpha):
        return result(
            "improved", f"{line}: better than the baseline by more than {num(check.percent)}%"
        )
    return result("pass", f"{line} within {bound}")


def evaluate(
    current: Measurement,
    baseline: Measurement | None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
    *,
    generator_bound: bool = False,
    confidence: float = 0.95,
) -> tuple[CheckResult, ...]:
    """Every check's result. Relative checks need a baseline; absolute limits do not."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence {confidence} outside [0.5, 1)")
    results = []
    for check in checks:
        if isinstance(check, AbsoluteCheck):
            results.append(_absolute(check, current))
        elif baseline is not None:
            results.append(_relative(check, current, baseline, confidence, generator_bound))
    return tuple(results)


def verdict_of(
    results: Sequence[CheckResult], *, has_baseline: bool, generator_bound: bool
) -> Verdict:
    """The status from check results: a failure wins, then generator-bound, then no
    baseline. Reasons are the failures (and why a run is not a pass); the rest is notes."""
    reasons = [r.message for r in results if r.outcome == "fail"]
    notes = [
        r.message
        for r in results
        if r.outcome in ("improved", "not-credible", "skipped", "contended")
    ]
    status: Status = "regression" if reasons else "pass"
    if generator_bound:
        throughput = [r.metric for r in results if r.outcome == "generator-bound"]
        notes += [r.message for r in results if r.outcome == "generator-bound"]
        reasons.append(
            GENERATOR_BOUND.format(checks=" and ".join(throughput) if throughput else "throughput")
        )
        status = "regression" if status == "regression" else "generator-bound"
    if not has_baseline:
        reasons.append(NO_BASELINE)
        if status == "pass":
            status = "no-baseline"
    return Verdict(status, tuple(reasons), tuple(notes))


def decide(
    current: Measurement,
    baseline: Measurement | None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
    *,
    generator_bound: bool = False,
    confidence: float = 0.95,
) -> Verdict:
    """The verdict for one measurement: the one place a gate decides."""
    results = evaluate(
        current, baseline, checks, generator_bound=generator_bound, confidence=confidence
    )
    return verdict_of(results, has_baseline=baseline is not None, generator_bound=generator_bound)
