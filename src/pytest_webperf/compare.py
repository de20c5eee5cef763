"""Parsed checks, and the one place a verdict is decided.

Grammar of ``--webperf-compare-fail`` (comma-separated, spaces allowed)::

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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pytest_webperf import stats
from pytest_webperf.errors import OptionError
from pytest_webperf.models import Delivery, Measurement, RunResult, Status, Verdict

Direction = Literal["up", "down"]  # the direction that is bad
Combine = Literal["mean", "max", "sum", "rate"]
Op = Literal["<", "<=", ">", ">="]

NO_BASELINE = "no baseline (run with --webperf-save)"
GENERATOR_BOUND = (
    "generator-bound: the load generator, not the server, was the bottleneck, so {checks} "
    "measured the generator; give it more processes (--webperf-workers=N), use fewer users "
    "(--webperf-concurrency), or limit the target's CPU so that the server saturates first"
)


# --- what can be measured ----------------------------------------------------------------


def _server_cpu_series(run: RunResult) -> list[float]:
    """Server CPU % per sample time in the measured phase, summed over the parts."""
    per_t: dict[float, float] = {}
    for sample in run.resources:
        if sample.t >= 0:
            key = round(sample.t, 3)
            per_t[key] = per_t.get(key, 0.0) + sample.cpu_percent
    return [per_t[t] for t in sorted(per_t)]


def _server_cpu_mean(run: RunResult) -> float | None:
    series = _server_cpu_series(run)
    return stats.mean(series) if series else None


def _server_rss_peak(run: RunResult) -> float | None:
    per_t: dict[float, float] = {}
    for sample in run.resources:
        if sample.t >= 0:
            key = round(sample.t, 3)
            per_t[key] = per_t.get(key, 0.0) + sample.rss_mb
    return max(per_t.values()) if per_t else None


def _cpu_per_req(run: RunResult) -> float | None:
    """Service demand in µs: the cgroup counter when there is one, else the sampled
    CPU % integrated over the measured phase (loses processes that died between polls)."""
    if run.cpu_per_req_us is not None:
        return run.cpu_per_req_us
    cpu = _server_cpu_mean(run)
    if cpu is None or not run.requests:
        return None
    return cpu / 100 * run.duration_s * 1e6 / run.requests


def _rps_series(run: RunResult) -> list[float]:
    return [s.rps for s in run.series if s.elapsed > 0]


def _latency(name: str) -> Callable[[RunResult], float | None]:
    return lambda run: float(getattr(run.latency, name))


def _snapshot_latency(name: str) -> Callable[[RunResult], list[float]]:
    def series(run: RunResult) -> list[float]:
        values = (getattr(s, name) for s in run.series)
        return [float(v) for v in values if v is not None]

    return series


def _delivery(run: RunResult) -> Delivery | None:
    """Where an MQTT run's messages ended: the server's store (what seed 002 counts)
    when it was read back, else the observer subscriber."""
    if run.mqtt is None:
        return None
    return run.mqtt.store or run.mqtt.observer


def _tps(run: RunResult) -> float | None:
    return run.mqtt.tps if run.mqtt is not None and run.mqtt.tps is not None else run.rps


def _delivery_count(name: str) -> Callable[[RunResult], float | None]:
    def count(run: RunResult) -> float | None:
        delivery = _delivery(run)
        return None if delivery is None else float(getattr(delivery, name))

    return count


def _e2e_p99(run: RunResult) -> float | None:
    delivery = _delivery(run)
    return None if delivery is None or delivery.latency is None else delivery.latency.p99_ms


def _published(run: RunResult) -> float:
    return float(run.mqtt.published) if run.mqtt is not None else 0.0


def _requests(run: RunResult) -> float:
    return float(run.requests)


@dataclass(frozen=True)
class Metric:
    """One thing a check can look at.

    ``per_run`` gives the value of one repetition (None: not measured); ``series``
    its per-second values (for the within-run spread); ``combine`` says how the
    repetitions make the value an absolute limit is held against. ``count`` metrics
    are event counts compared as rates per request. ``throughput`` metrics measure
    the generator when it is the bottleneck. ``load_sensitive`` metrics (throughput and
    latency) move when other processes take the machine's CPU, so a relative check on
    them is not judged when either run was contended; service demand is not affected.
    """

    name: str
    unit: str
    bad: Direction
    per_run: Callable[[RunResult], float | None] = field(compare=False)
    series: Callable[[RunResult], list[float]] | None = field(default=None, compare=False)
    combine: Combine = "mean"
    count: bool = False
    throughput: bool = False
    load_sensitive: bool = False  # moves when other processes take the CPU (rps, latency)
    aliases: tuple[str, ...] = ()  # the first one is how absolute limits are written
    exposure: Callable[[RunResult], float] = field(default=_requests, compare=False)

    @property
    def limit_name(self) -> str:
        return self.aliases[0] if self.aliases else self.name


# Adding a metric is one line.
METRICS: Mapping[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "rps", "", "down", lambda r: r.rps, _rps_series, throughput=True, load_sensitive=True
        ),
        Metric(
            "tps",
            "",
            "down",
            _tps,
            _rps_series,
            throughput=True,  # seed 002's msgs/s
            load_sensitive=True,
        ),
        Metric(
            "p50",
            "ms",
            "up",
            _latency("p50_ms"),
            _snapshot_latency("p50_ms"),
            aliases=("p50_ms",),
            load_sensitive=True,
        ),
        Metric("p90", "ms", "up", _latency("p90_ms"), aliases=("p90_ms",), load_sensitive=True),
        Metric(
            "p95",
            "ms",
            "up",
            _latency("p95_ms"),
            _snapshot_latency("p95_ms"),
            aliases=("p95_ms",),
            load_sensitive=True,
        ),
        Metric(
            "p99",
            "ms",
            "up",
            _latency("p99_ms"),
            _snapshot_latency("p99_ms"),
            aliases=("p99_ms",),
            load_sensitive=True,
        ),
        Metric("p999", "ms", "up", _latency("p999_ms"), aliases=("p999_ms",), load_sensitive=True),
        Metric(
            "latency_mean",
            "ms",
            "up",
            _latency("mean_ms"),
            aliases=("mean_ms",),
            load_sensitive=True,
        ),
        Metric("errors", "", "up", lambda r: r.errors, combine="sum", count=True),
        Metric("timeouts", "", "up", lambda r: r.timeouts, combine="sum", count=True),
        Metric("error_rate", "", "up", lambda r: r.errors, combine="rate", count=True),
        Metric("cpu", "%", "up", _server_cpu_mean, _server_cpu_series, aliases=("cpu_percent",)),
        Metric("rss", "MB", "up", _server_rss_peak, combine="max", aliases=("rss_mb",)),
        Metric(
            "cpu_per_req",
            "us",
            "up",
            _cpu_per_req,
            aliases=("cpu_per_req_us",),
        ),
        Metric(
            "lost",
            "",
            "up",
            _delivery_count("lost"),
            combine="sum",
            count=True,
            exposure=_published,
        ),
        Metric(
            "dup",
            "",
            "up",
            _delivery_count("duplicates"),
            combine="sum",
            count=True,
            exposure=_published,
            aliases=("duplicates",),
        ),
        Metric("e2e_p99", "ms", "up", _e2e_p99, aliases=("e2e_p99_ms",), load_sensitive=True),
    )
}
_BY_SPELLING: Mapping[str, Metric] = {
    spelling: m for m in METRICS.values() for spelling in (m.name, *m.aliases)
}


# --- checks and their parser -------------------------------------------------------------


def _num(value: float) -> str:
    """A number as the parser reads it back exactly."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _finite(value: float, metric: str) -> float:
    if metric not in METRICS:
        raise OptionError(f"unknown metric {metric!r}: {GRAMMAR}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise OptionError(f"the number in a {metric} check must be finite and >= 0, not {value}")
    return value


@dataclass(frozen=True)
class RelativeCheck:
    """Fail when ``metric`` got worse than the baseline by more than ``percent`` %."""

    metric: str
    percent: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "percent", _finite(self.percent, str(self.metric)))

    def __str__(self) -> str:
        return f"{self.metric}:{_num(self.percent)}%"


@dataclass(frozen=True)
class AbsoluteCheck:
    """Fail when the current value of ``metric`` is not ``op limit``."""

    metric: str
    op: Op
    limit: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "limit", _finite(self.limit, str(self.metric)))

    def __str__(self) -> str:
        return f"{METRICS[self.metric].limit_name}{self.op}{_num(self.limit)}"

    def holds(self, value: float) -> bool:
        return {
            "<": value < self.limit,
            "<=": value <= self.limit,
            ">": value > self.limit,
            ">=": value >= self.limit,
        }[self.op]


Check = RelativeCheck | AbsoluteCheck

GRAMMAR = (
    "expected a comma-separated list of METRIC:N% (worse than the baseline by more than "
    "N %, e.g. rps:5%), METRIC<V / METRIC<=V / METRIC>V / METRIC>=V (a limit on this run, "
    "e.g. p99_ms<500) or COUNT:N (at most N errors/timeouts/lost/dup); metrics: "
    + ", ".join(sorted(_BY_SPELLING))
)
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_CHECK = re.compile(
    rf"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:(?P<op><=|>=|<|>)\s*(?P<limit>{_NUMBER})"
    rf"|:\s*(?P<sign>[+-]?)\s*(?P<num>{_NUMBER})\s*(?P<pct>%?))"
)


def parse_check(text: str) -> Check:
    """One check from its text; raises OptionError naming the bad part."""
    part = text.strip()
    match = _CHECK.fullmatch(part)
    if match is None:
        raise OptionError(f"bad check {part!r} in --webperf-compare-fail: {GRAMMAR}")
    metric = _BY_SPELLING.get(match["name"].lower())
    if metric is None:
        raise OptionError(f"unknown metric {match['name']!r} in check {part!r}: {GRAMMAR}")
    if match["op"]:
        return AbsoluteCheck(metric.name, match["op"], float(match["limit"]))  # type: ignore[arg-type]
    value = float(match["num"])
    if not match["pct"]:
        if metric.count and value.is_integer():
            return AbsoluteCheck(metric.name, "<=", value)
        raise OptionError(
            f"check {part!r} needs a unit: write {metric.name}:{match['num']}% for a change "
            f"relative to the baseline, or {metric.limit_name}<{match['num']} for a limit "
            f"({GRAMMAR})"
        )
    sign = match["sign"]
    if sign and (sign == "+") != (metric.bad == "up"):
        worse = "rises" if metric.bad == "up" else "falls"
        raise OptionError(
            f"check {part!r} points the wrong way: {metric.name} is worse when it {worse}; "
            f"write {metric.name}:{match['num']}% (the direction is known per metric)"
        )
    return RelativeCheck(metric.name, value)


def parse_checks(spec: str) -> tuple[Check, ...]:
    """All checks of a ``--webperf-compare-fail`` value; '' or 'none' means no check."""
    if spec.strip().lower() in ("", "none"):
        return ()
    checks: list[Check] = []
    for part in spec.split(","):
        if not part.strip():
            raise OptionError(f"empty check in --webperf-compare-fail={spec!r}: {GRAMMAR}")
        check = parse_check(part)
        if check in checks:
            raise OptionError(f"check {str(check)!r} given twice in {spec!r}")
        checks.append(check)
    return tuple(checks)


def format_checks(checks: Iterable[Check]) -> str:
    return ",".join(str(c) for c in checks) or "none"


# A 10 % slower server shows as -10 % rps when the server is the bottleneck, and as
# +10 % CPU per request whether or not it is (service demand does not depend on who
# saturates). Latency percentiles are far noisier than means, hence 20 %. Errors are
# compared as a rate: one stray timeout passes, a 1.5x rise that is credible fails.
DEFAULT_CHECKS: tuple[Check, ...] = parse_checks("rps:5%,cpu_per_req:5%,p95:20%,errors:50%")
# MQTT: QoS 2 promises every message exactly once, so a loss or a duplicate fails
# whatever the baseline says; throughput (seed 002's tps), the server's CPU per
# message and the end-to-end p99 are compared with the baseline.
DEFAULT_MQTT_CHECKS: tuple[Check, ...] = parse_checks(
    "tps:5%,cpu_per_req:5%,e2e_p99:20%,lost:0,dup:0"
)


# --- evaluation --------------------------------------------------------------------------

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


# A quarter of a core used by other processes while measuring: above it, throughput and
# latency changes are not the server's (measured here: rps moved -11..-28% on an unchanged
# server under other agents' load, while cpu_per_req stayed within +-4%).
CONTENDED_CPU_PERCENT = 25.0


def foreign_cpu(m: Measurement) -> float:
    """Mean CPU other processes used during the measurement's runs (0 when unknown)."""
    values = [r.foreign_cpu_percent for r in m.runs if r.foreign_cpu_percent is not None]
    return sum(values) / len(values) if values else 0.0


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
            f" of {'requests' if metric.exposure is _requests else 'messages'})"
        )
    else:
        shown = f"{_fmt(est.baseline, unit)} -> {_fmt(est.current, unit)}"
    line = f"{metric.name} {shown} ({_pct(est.change)}{ci}{est.partial})"
    bound = f"{'+' if sign > 0 else '-'}{_num(check.percent)}%"
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
            "improved", f"{line}: better than the baseline by more than {_num(check.percent)}%"
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
