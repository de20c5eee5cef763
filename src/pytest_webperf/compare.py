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
    METRIC[ENDPOINT]...   any of these for one endpoint of a request mix alone
                     (p95[create]:10%): the metric is read from each repetition's
                     ``endpoints[ENDPOINT]`` and judged by the same estimators. An
                     endpoint this run did not send fails (the check names nothing
                     measured); one the baseline (or the base) lacks is skipped, said so.

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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from pytest_webperf import stats
from pytest_webperf.checks import (
    DEFAULT_CHECKS,
    DEFAULT_MQTT_CHECKS,
    AbsoluteCheck,
    Check,
    RelativeCheck,
    num,
)
from pytest_webperf.estimates import (
    Estimate,
    combined,
    count_estimate,
    interval,
    level_estimate,
    paired_estimate,
)
from pytest_webperf.metrics import (
    CONTENDED_CPU_PERCENT,
    METRICS,
    Metric,
    foreign_cpu,
)
from pytest_webperf.models import Measurement, RunResult, Status, Verdict
from pytest_webperf.zerofigure import zero_figure

NO_BASELINE = "no baseline (run with --webperf-save)"
ONE_INSTANCE = (
    "{side} ran on a single process instance: the interval does not cover the bias between "
    "instances of a server (several per cent; `webperf noise` measures it), so a change "
    "of that size may be the instance; --webperf-restart-every=1 with more repetitions "
    "measures across instances"
)
GENERATOR_BOUND = (
    "generator-bound: the load generator, not the server, was the bottleneck, so {checks} "
    "measured the generator; give it more processes (--webperf-workers=N), use fewer users "
    "(--webperf-concurrency), or limit the target's CPU so that the server saturates first"
)
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(value: float, unit: str) -> str:
    text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{text}{unit}" if unit else text


def _pct(change: float) -> str:
    return "+inf%" if math.isinf(change) else f"{change * 100:+.1f}%"


# Beyond this a "could detect" figure says only that the run knew nothing (one or two
# process instances give t quantiles in the tens): it is shown capped.
DETECTABLE_CAP = 10.0  # +1000 %


def _detectable(value: float) -> str:
    if value > DETECTABLE_CAP:
        return f"> {DETECTABLE_CAP * 100:.0f}% (too few repetitions or instances to say more)"
    return f">= {value * 100:.1f}%"


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
) -> CheckResult:
    """One relative check. ``alpha`` is the one-sided level a failure must reach (an A/B
    run that looks several times spends a smaller one per look)."""
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
    ci = f", {level:.4g}% CI {_pct(low)}..{_pct(high)}" if has_interval else ""  # type: ignore[arg-type]
    if est.counts is not None:
        shown = (
            f"{est.counts[1]} -> {est.counts[0]} ({est.baseline:.3%} -> {est.current:.3%}"
            f" of {metric.events})"
        )
    else:
        shown = f"{_fmt(est.baseline, unit)} -> {_fmt(est.current, unit)}"
    line = f"{metric.label} {shown} ({_pct(est.change)}{ci}{est.partial})"
    bound = f"{'+' if sign > 0 else '-'}{num(check.percent)}%"
    detectable = (
        None
        if est.se is None or metric.count
        else stats.detectable_change(est.se, est.df, alpha=alpha, power=POWER)
    )
    could = "" if detectable is None else f"; could detect {_detectable(detectable)}"
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

    if generator_bound and metric.throughput:
        return result(
            "generator-bound", f"{line}: not a measure of the server (generator-bound run)"
        )
    if metric.load_sensitive and max(busy) > CONTENDED_CPU_PERCENT and sign * est.change > limit:
        return result(
            "contended",
            (
                f"{line}: not judged, other processes used {busy[0]:.0f}% of a core during "
                f"{words[0]} and {busy[1]:.0f}% during {words[1]} (limit "
                f"{CONTENDED_CPU_PERCENT:g}%): rps and latency followed the machine, not the "
                "server; cpu_per_req is still judged"
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
        if detectable is not None and detectable > limit:
            return result(
                "undecided",
                f"{metric.label}: too noisy to judge {num(check.percent)}%: could detect "
                f"{_detectable(detectable)}, and it moved beyond it ({line})",
            )
        return result(
            "not-credible",
            f"{line} beyond {bound} but within the noise of the two runs: not failed{could}",
        )
    if -sign * est.change > limit and (not has_interval or est.p_better < alpha):
        return result(
            "improved",
            f"{line}: better than {words[1].removesuffix(chr(39) + 's')} by more "
            f"than {num(check.percent)}%",
        )
    worst = high if sign > 0 else (None if low is None else -low)
    if detectable is not None and detectable > limit and (worst is None or worst >= limit):
        return result(
            "undecided",
            f"{metric.label}: too noisy to judge {num(check.percent)}%: could detect "
            f"{_detectable(detectable)} ({line})",
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


def evaluate(
    current: Measurement,
    baseline: Measurement | None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
    *,
    generator_bound: bool = False,
    confidence: float = 0.95,
    instances: Sequence[int] | None = None,
    look: int = 0,
) -> tuple[CheckResult, ...]:
    """Every check's result. Relative checks need a baseline; absolute limits do not.

    With ``instances`` the baseline is side A of an A/B run, paired run by run with
    ``current`` (``instances[i]``: which process instances pair i ran on), and ``look``
    (1, 2, ...) says how many times the run has looked at the data: the level of a
    failure at look k is (1 - confidence) / 2 / 2**k, so that all looks together keep
    the false-alarm rate at or below the one-sided (1 - confidence) / 2."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence {confidence} outside [0.5, 1)")
    alpha = (1 - confidence) / 2 / 2**look
    busy = (foreign_cpu(current), foreign_cpu(baseline) if baseline is not None else 0.0)
    words = (
        ("the change (B)", "the base (A)'s")
        if instances is not None
        else ("this run", "the baseline's")
    )

    def estimate(metric: Metric) -> Estimate | str:
        assert baseline is not None
        if metric.count:
            return count_estimate(metric, current, baseline)
        if instances is not None:
            return paired_estimate(metric, current, baseline, instances)
        return level_estimate(metric, current, baseline)

    sides = ("this run", "the baseline")
    if instances is not None:
        sides = ("the change (B)", "the base (A)")
    results = []
    for check in checks:
        missing = _missing_endpoint(check, current, baseline, sides)
        if missing is not None:
            results.append(missing)
        elif isinstance(check, AbsoluteCheck):
            results.append(_absolute(check, current))
        elif baseline is not None and (
            zero := zero_figure(metric_of(check), current, baseline, sides)
        ):
            results.append(
                CheckResult(str(check), check.metric, "undecided", zero, endpoint=check.endpoint)
            )
        elif baseline is not None:
            results.append(
                _relative(
                    check,
                    estimate,
                    busy,
                    confidence=confidence,
                    alpha=alpha,
                    generator_bound=generator_bound,
                    words=words,
                )
            )
    return tuple(results)


def settled(results: Sequence[CheckResult]) -> bool:
    """Whether every check is decided either way (an A/B run may stop adding pairs)."""
    return not any(unsettled(r.outcome, r.metric) for r in results)


def verdict_settled(verdict: Verdict) -> bool:
    """``settled`` for a verdict's recorded checks."""
    return not any(unsettled(str(c["outcome"]), str(c["metric"])) for c in verdict.checks)


def default_checks(measurement: Measurement) -> tuple[Check, ...]:
    """The checks a measurement is judged by when neither the test nor the run gives
    any: MQTT's for MQTT telemetry, else HTTP's. The one place the fallback is chosen."""
    mqtt = measurement.generator == "mqtt" or any(r.mqtt is not None for r in measurement.runs)
    return DEFAULT_MQTT_CHECKS if mqtt else DEFAULT_CHECKS


def mostly_generator_bound(runs: Sequence[RunResult]) -> bool:
    """Whether most repetitions were generator-bound (a side's rule)."""
    return sum(r.generator_bound for r in runs) * 2 > len(runs)


def verdict_of(
    results: Sequence[CheckResult],
    *,
    has_baseline: bool,
    generator_bound: bool,
    health: CheckResult | None = None,
    saving: bool = False,
    require_power: bool = False,
) -> Verdict:
    """The status from check results: broken first, then a failure, then generator-bound,
    undecided and no baseline. Reasons are the failures (and why a run is not a pass);
    the rest is notes."""
    reasons = [r.message for r in results if r.outcome == "fail"]
    open_ = [r.message for r in results if unsettled(r.outcome, r.metric)]
    notes = [
        r.message
        for r in results
        if r.outcome in ("improved", "skipped", "contended")
        or (r.outcome in UNSETTLED and not unsettled(r.outcome, r.metric))
    ]
    status: Status = "regression" if reasons else "pass"
    if require_power and open_:
        reasons += [f"{m} (--webperf-require-power)" for m in open_]
        status = "regression"
    else:
        notes += open_
    if generator_bound:
        throughput = [r.metric for r in results if r.outcome == "generator-bound"]
        notes += [r.message for r in results if r.outcome == "generator-bound"]
        reasons.append(
            GENERATOR_BOUND.format(checks=" and ".join(throughput) if throughput else "throughput")
        )
        status = "regression" if status == "regression" else "generator-bound"
    if open_ and status == "pass":
        status = "undecided"
    if not has_baseline and not saving:
        reasons.append(NO_BASELINE)
        if status == "pass":
            status = "no-baseline"
    checks = [r.to_dict() for r in results]
    if health is not None:
        reasons.insert(0, health.message)
        status = "broken" if health.message.startswith("broken") else "regression"
        checks.insert(0, health.to_dict())
    return Verdict(status, tuple(reasons), tuple(notes), tuple(checks))


def decide(
    current: Measurement,
    baseline: Measurement | None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
    *,
    generator_bound: bool = False,
    confidence: float = 0.95,
    max_error_rate: float | None = None,
    saving: bool = False,
    require_power: bool = False,
    instances: Sequence[int] | None = None,
    look: int = 0,
) -> Verdict:
    """The verdict for one measurement: the one place a gate decides. With ``instances``
    (an A/B run) ``baseline`` is side A, paired run by run (see ``evaluate``)."""
    results = evaluate(
        current,
        baseline,
        checks,
        generator_bound=generator_bound,
        confidence=confidence,
        instances=instances,
        look=look,
    )
    decided = verdict_of(
        results,
        has_baseline=baseline is not None,
        generator_bound=generator_bound,
        health=_error_health(current, max_error_rate),
        saving=saving,
        require_power=require_power,
    )
    side = one_instance(current, baseline, instances)
    if side is None or not any(isinstance(c, RelativeCheck) for c in checks):
        return decided
    return replace(decided, notes=(*decided.notes, ONE_INSTANCE.format(side=side)))


def one_instance(
    current: Measurement, baseline: Measurement | None, instances: Sequence[int] | None
) -> str | None:
    """Which side of a comparison ran on a single process instance (its interval then
    says nothing of the instance bias), or None. Runs stored without their instance
    count as independent."""
    if baseline is None:
        return None
    if instances is not None:  # A/B: both sides restart together, pair by pair
        return "each side" if len(set(instances)) < 2 else None
    single = [
        name
        for name, m in (("this run", current), ("the baseline", baseline))
        if m.runs
        and all(r.instance is not None for r in m.runs)
        and len({r.instance for r in m.runs}) < 2
    ]
    if not single:
        return None
    return single[0] if len(single) == 1 else "this run and the baseline each"
