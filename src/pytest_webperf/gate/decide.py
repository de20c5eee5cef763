"""The one place a verdict is decided, from parsed checks (``gate/grammar.py``) on the
metric table (``gate/metrics/``).

The checks' grammar is written once, in ``docs/reference/checks.md`` (parsed in
``gate/grammar.py``).

How a relative check decides (see ``stats/ratio.py``): the change of the mean over
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

from collections.abc import Sequence
from dataclasses import asdict, replace

from pytest_webperf.gate import capacity as capacity_gate
from pytest_webperf.gate.estimates import (
    Estimate,
    count_estimate,
    level_estimate,
    paired_estimate,
)
from pytest_webperf.gate.grammar import (
    DEFAULT_CHECKS,
    DEFAULT_COUNT_CHECKS,
    DEFAULT_MQTT_CHECKS,
    DEFAULT_STREAM_CHECKS,
    AbsoluteCheck,
    Check,
    RelativeCheck,
)
from pytest_webperf.gate.metrics import (
    Metric,
    foreign_cpu,
)
from pytest_webperf.gate.outcome import (
    UNSETTLED,
    CheckResult,
    _absolute,
    _error_health,
    _missing_endpoint,
    _relative,
    metric_of,
    unchecked,
    unsettled,
)
from pytest_webperf.gate.undecided import COUNTED_METRIC, CPU_COST, Evidence
from pytest_webperf.gate.zero import from_none, zero_figure
from pytest_webperf.models.measurement import Measurement, RunResult, Status, Verdict

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


def evaluate(
    current: Measurement,
    baseline: Measurement | None,
    checks: Sequence[Check] = DEFAULT_CHECKS,
    *,
    generator_bound: bool = False,
    confidence: float = 0.95,
    instances: Sequence[int] | None = None,
    look: int = 0,
    evidence: Evidence | None = None,
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
        judged = capacity_gate.judge(check, current, baseline, ab=instances is not None)
        if judged is not None:  # webperf.capacity's answer: an interval, not repetitions
            results.append(CheckResult(str(check), "capacity", **asdict(judged)))
        elif missing is not None:
            results.append(missing)
        elif isinstance(check, AbsoluteCheck):
            results.append(_absolute(check, current))
        elif baseline is not None and (
            zero := zero_figure(metric_of(check), current, baseline, sides)
        ):
            results.append(
                CheckResult(str(check), check.metric, "undecided", zero, endpoint=check.endpoint)
            )
        elif (
            baseline is not None
            and isinstance(check, RelativeCheck)
            and (none := from_none(check, metric_of(check), current, baseline, sides))
        ):
            results.append(none)
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
                    paired=instances is not None,
                    evidence=evidence,
                )
            )
    return tuple(results)


def settled_by_counting(
    results: Sequence[CheckResult], counted: Verdict
) -> tuple[CheckResult, ...]:
    """The results with each CPU-cost check timing left open decided by the counted
    measurement of the same load (``--webperf-count=auto``): its ``instructions_per_req``
    check's outcome, both lines said; left as it was when counting did not decide either."""
    found = [c for c in counted.checks if c.get("metric") == COUNTED_METRIC]
    if not found or found[0].get("checked") is False:
        return tuple(results)
    by_count = found[0]
    outcome = str(by_count.get("outcome"))
    settled = "fail" if outcome == "fail" else "improved" if outcome == "improved" else "pass"
    return tuple(
        replace(
            r,
            outcome=settled,  # type: ignore[arg-type]
            message=f"{r.check}: settled by counting: {by_count.get('message')} (timed: "
            f"{r.message})",
            would_decide=None,
        )
        if r.metric in CPU_COST and not r.checked
        else r
        for r in results
    )


def settled(results: Sequence[CheckResult]) -> bool:
    """Whether every check is decided either way (an A/B run may stop adding pairs)."""
    return not any(unsettled(r.outcome, r.metric) for r in results)


def verdict_settled(verdict: Verdict) -> bool:
    """``settled`` for a verdict's recorded checks."""
    return not any(unsettled(str(c["outcome"]), str(c["metric"])) for c in verdict.checks)


def default_checks(measurement: Measurement) -> tuple[Check, ...]:
    """The checks a measurement is judged by when neither the test nor the run gives
    any: MQTT's for MQTT telemetry, the counted ones for a counted measurement, a stream
    mode's for WebSocket and SSE (echo, fan-out, idle, SSE), else HTTP's. The one place the
    fallback is chosen."""
    if any(r.counts is not None for r in measurement.runs):
        return DEFAULT_COUNT_CHECKS
    mqtt = (measurement.generator or "").startswith("mqtt") or any(
        r.mqtt is not None for r in measurement.runs
    )
    modes = [r.stream.mode for r in (*measurement.runs, *measurement.base_runs) if r.stream]
    if modes:
        return DEFAULT_STREAM_CHECKS[modes[0]]
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
    # a check the machine's load kept from being judged is open too: not checked
    open_ = [r.message for r in results if unchecked(r.outcome, r.metric)]
    notes = [
        r.message
        for r in results
        if r.outcome in ("improved", "skipped")
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
    evidence: Evidence | None = None,
    counted: Verdict | None = None,
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
        evidence=evidence,
    )
    if counted is not None:
        results = settled_by_counting(results, counted)
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
