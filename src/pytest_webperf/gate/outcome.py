"""How one check is decided on a measurement: an absolute limit on the current run, a
relative change against the baseline (or the base) with its interval, the error-rate
health check, an endpoint the run did not send; each a CheckResult. compare.py turns
them into the verdict."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from pytest_webperf.gate.estimates import (
    Estimate,
    combined,
    interval,
)
from pytest_webperf.gate.grammar import (
    AbsoluteCheck,
    Check,
    RelativeCheck,
    num,
)
from pytest_webperf.gate.metrics import (
    CONTENDED_CPU_PERCENT,
    METRICS,
    Metric,
)
from pytest_webperf.gate.undecided import Evidence, would_decide
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.stats import ratio

# A run where at least this share of requests failed is broken, whatever else it shows.
BROKEN_ERROR_RATE = 0.5


# The power at which "could detect >= N %" is stated: a regression of N % is caught by
# the significance test 4 times in 5.
POWER = 0.8


Outcome = Literal[
    "pass",
    "fail",
    "improved",
    "not-credible",
    "undecided",
    "skipped",
    "generator-bound",
    "contended",
]


UNSETTLED: frozenset[str] = frozenset({"not-credible", "undecided"})


def unsettled(outcome: str, metric: str) -> bool:
    """Whether a check's outcome leaves the question open. A count (errors, lost) whose
    rise is within the noise is settled: one stray error never holds a gate open."""
    return outcome in UNSETTLED and not (metric in METRICS and METRICS[metric].count)


def unchecked(outcome: str, metric: str) -> bool:
    """Whether a check's outcome leaves it open for the verdict: ``unsettled``, or not
    judged because other processes took the CPU (``contended``)."""
    return unsettled(outcome, metric) or outcome == "contended"


@dataclass(frozen=True)
class CheckResult:
    """How one check came out, with the numbers a report shows."""

    check: str
    metric: str
    outcome: Outcome
    message: str
    endpoint: str | None = None  # the endpoint of a request mix the check judged alone
    current: float | None = None
    baseline: float | None = None  # the stored baseline's value, or side A's in an A/B run
    change: float | None = None  # relative, -0.162 for -16.2 %
    low: float | None = None
    high: float | None = None
    p_value: float | None = None  # one-sided, for "worse"
    detectable: float | None = None  # smallest regression this run would catch (POWER)
    threshold: float | None = None  # the check's threshold as a fraction (rps:5% -> 0.05)
    would_decide: str | None = None  # an undecided check: what would decide it

    @property
    def checked(self) -> bool:
        """Whether it was checked: not open (``unchecked``), and, for a throughput check,
        not left to a generator that was the limit (``generator-bound``)."""
        return not (unchecked(self.outcome, self.metric) or self.outcome == "generator-bound")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "checked": self.checked}


def _fmt(value: float, unit: str) -> str:
    text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{text}{unit}" if unit else text


def _pct(change: float, digits: int = 1) -> str:
    return "+inf%" if math.isinf(change) else f"{change * 100:+.{digits}f}%"


# Beyond this a "could detect" figure says only that the run knew nothing (one or two
# process instances give t quantiles in the tens): it is shown capped.
DETECTABLE_CAP = 10.0  # +1000 %


def _detectable(value: float, digits: int = 1) -> str:
    if value > DETECTABLE_CAP:
        return f"> {DETECTABLE_CAP * 100:.0f}% (too few repetitions or instances to say more)"
    return f">= {value * 100:.{digits}f}%"


def _skipped(check: Check, metric: Metric, why: str) -> CheckResult:
    return CheckResult(
        str(check), metric.name, "skipped", f"{check}: skipped, {why}", endpoint=check.endpoint
    )


def metric_of(check: Check) -> Metric:
    """The metric a check reads: the run's, or its endpoint's alone."""
    metric = METRICS[check.metric]
    return metric if check.endpoint is None else metric.for_endpoint(check.endpoint)


def _endpoint_names(m: Measurement) -> str:
    names = list(dict.fromkeys(name for run in m.runs for name in run.endpoints))
    return f"its endpoints: {', '.join(names)}" if names else "it sent a single request shape"


def _sent(endpoint: str, m: Measurement) -> bool:
    return any(endpoint in run.endpoints for run in m.runs)


def _missing_endpoint(
    check: Check, current: Measurement, baseline: Measurement | None, sides: tuple[str, str]
) -> CheckResult | None:
    """An endpoint check whose endpoint one side never sent: this run (the check names
    nothing measured: a failure, so a misspelt name cannot pass), or the baseline / the
    base (a new endpoint: nothing to compare with, skipped and said so)."""
    endpoint = check.endpoint
    if endpoint is None or not current.runs:
        return None
    if not _sent(endpoint, current):
        return CheckResult(
            str(check),
            check.metric,
            "fail",
            f"{check}: no endpoint {endpoint!r} in {sides[0]} ({_endpoint_names(current)}); "
            "the check names an endpoint the workload did not send",
            endpoint=endpoint,
        )
    relative = isinstance(check, RelativeCheck) and baseline is not None and baseline.runs
    if relative and baseline is not None and not _sent(endpoint, baseline):
        return _skipped(
            check,
            METRICS[check.metric],
            f"endpoint {endpoint!r} is not in {sides[1]} ({_endpoint_names(baseline)}): "
            "nothing to compare it with",
        )
    return None


def _absolute(check: AbsoluteCheck, current: Measurement) -> CheckResult:
    metric = metric_of(check)
    value = combined(metric, current)
    if value is None:
        return _skipped(check, metric, f"{metric.label} was not measured in this run")
    shown = _fmt(value, "" if metric.combine == "rate" else metric.unit)
    name = metric.limit_name + ("" if check.endpoint is None else f"[{check.endpoint}]")
    if check.holds(value):
        return CheckResult(
            str(check),
            metric.name,
            "pass",
            f"{name} {shown} within {check}",
            current=value,
            endpoint=check.endpoint,
        )
    return CheckResult(
        str(check),
        metric.name,
        "fail",
        f"{name} {shown} breaks the limit {check}",
        current=value,
        endpoint=check.endpoint,
    )


Estimator = Callable[[Metric], "Estimate | str"]


def _relative(
    check: RelativeCheck,
    estimate: Estimator,
    busy: tuple[float, float],
    *,
    confidence: float,
    alpha: float,
    generator_bound: bool,
    words: tuple[str, str] = ("this run", "the baseline's"),
    paired: bool = False,
    evidence: Evidence | None = None,
) -> CheckResult:
    """One relative check. ``alpha`` is the one-sided level a failure must reach (an A/B
    run that looks several times spends a smaller one per look). ``paired``: an A/B
    run, whose interleaved pairs put other processes' load into the interval, so the
    contention rule (rps and latency not judged above ``CONTENDED_CPU_PERCENT``) holds
    only against a stored baseline (measured: docs/explanation/figures.md)."""
    metric = metric_of(check)
    est = estimate(metric)
    if isinstance(est, str):
        return _skipped(check, metric, est)
    sign = 1 if metric.bad == "up" else -1
    limit = check.percent / 100
    low, high = interval(est, 1 - 2 * alpha)  # the level that decides (alpha per look)
    has_interval = low is not None and high is not None
    unit = "" if metric.count else metric.unit
    level = (1 - 2 * alpha) * 100
    digits = 2 if metric.precise else 1  # counted figures: to 0.01 %
    ci = f", {level:.4g}% CI {_pct(low, digits)}..{_pct(high, digits)}" if has_interval else ""  # type: ignore[arg-type]
    if est.counts is not None:
        shown = (
            f"{est.counts[1]} -> {est.counts[0]} ({est.baseline:.3%} -> {est.current:.3%}"
            f" of {metric.events})"
        )
    else:
        shown = f"{_fmt(est.baseline, unit)} -> {_fmt(est.current, unit)}"
    line = f"{metric.label} {shown} ({_pct(est.change, digits)}{ci}{est.partial})"
    bound = f"{'+' if sign > 0 else '-'}{num(check.percent)}%"
    detectable = (
        None
        if est.se is None or metric.count
        else ratio.detectable_change(est.se, est.df, alpha=alpha, power=POWER)
    )
    could = "" if detectable is None else f"; could detect {_detectable(detectable, digits)}"
    numbers = dict(
        check=str(check),
        metric=metric.name,
        current=est.current,
        baseline=est.baseline,
        change=est.change,
        low=low,
        high=high,
        p_value=est.p_worse,
        detectable=detectable,
        threshold=limit,
        endpoint=check.endpoint,
    )

    def result(outcome: Outcome, message: str) -> CheckResult:
        return CheckResult(outcome=outcome, message=message, **numbers)  # type: ignore[arg-type]

    def undecided(message: str) -> CheckResult:
        remedy = would_decide(
            metric.name,
            se=est.se,
            threshold=limit,
            alpha=alpha,
            power=POWER,
            evidence=evidence or Evidence(),
            busy_percent=max(busy),
            busy_limit=CONTENDED_CPU_PERCENT,
        )
        found = result("undecided", f"{message}; {remedy}" if remedy else message)
        return replace(found, would_decide=remedy or None)

    if generator_bound and metric.throughput:
        return result(
            "generator-bound", f"{line}: not a measure of the server (generator-bound run)"
        )
    crowded = metric.load_sensitive and max(busy) > CONTENDED_CPU_PERCENT
    during = (
        f"other processes used {busy[0]:.0f}% of a core during {words[0]} and "
        f"{busy[1]:.0f}% during {words[1].removesuffix(chr(39) + 's')}"
    )
    if crowded and not paired and sign * est.change > limit:
        return result(
            "contended",
            (
                f"{line}: not judged, {during} (limit {CONTENDED_CPU_PERCENT:g}%): rps and "
                "latency followed the machine, not the server; cpu_per_req is still judged"
            ),
        )
    aside = (
        f"; {during}, which the interleaved pairs' interval includes" if crowded and paired else ""
    )
    if sign * est.change > limit:
        if not has_interval:
            return result(
                "fail",
                f"{line} beyond {bound} (one repetition per side and no "
                "per-second series: the threshold alone decided; use "
                f"--webperf-repeat=3 or more){aside}",
            )
        if est.p_worse < alpha:
            return result("fail", f"{line} beyond {bound}{aside}")
        if detectable is not None and detectable > limit:
            return undecided(
                f"{metric.label}: too noisy to judge {num(check.percent)}%: could detect "
                f"{_detectable(detectable, digits)}, and it moved beyond it ({line}){aside}",
            )
        return result(
            "not-credible",
            f"{line} beyond {bound} but within the noise of the two runs: not failed{could}{aside}",
        )
    if -sign * est.change > limit and (not has_interval or est.p_better < alpha):
        return result(
            "improved",
            f"{line}: better than {words[1].removesuffix(chr(39) + 's')} by more "
            f"than {num(check.percent)}%",
        )
    worst = high if sign > 0 else (None if low is None else -low)
    if detectable is not None and detectable > limit and (worst is None or worst >= limit):
        return undecided(
            f"{metric.label}: too noisy to judge {num(check.percent)}%: could detect "
            f"{_detectable(detectable, digits)} ({line}){aside}",
        )
    return result("pass", f"{line} within {bound}{could}")


def _error_health(current: Measurement, max_error_rate: float | None) -> CheckResult | None:
    """The absolute limit on failed requests that holds baseline or not; None within it."""
    requests = sum(r.requests for r in current.runs)
    errors = sum(r.errors for r in current.runs)
    if max_error_rate is None or not current.runs:
        return None
    rate = errors / requests if requests else 1.0
    if requests and rate <= max_error_rate:
        return None
    kinds: dict[str, int] = {}
    for run in current.runs:
        for kind, count in run.error_kinds.items():
            kinds[kind] = kinds.get(kind, 0) + count
    ranked = sorted(kinds.items(), key=lambda kv: -kv[1])
    top = ", ".join(f"{k}: {n:,}" for k, n in ranked[:3])
    examples = {k: v for run in current.runs for k, v in run.error_examples.items()}
    if ranked and ranked[0][0] in examples:
        top += f"; e.g. {examples[ranked[0][0]]}"
    what = (
        f"no request completed ({top or 'nothing answered'})"
        if not requests
        else f"{errors:,} of {requests:,} requests failed ({rate:.1%}; {top or 'no kinds'})"
    )
    broken = not requests or rate >= BROKEN_ERROR_RATE
    prefix = "broken: " if broken else ""
    return CheckResult(
        f"error_rate<={num(max_error_rate * 100)}%",
        "error_rate",
        "fail",
        f"{prefix}{what}, over the limit of {max_error_rate:.1%} that holds with or "
        "without a baseline (raise it for a test that studies overload: "
        "@pytest.mark.webperf(max_error_rate=...))",
        current=rate,
        threshold=max_error_rate,
    )
