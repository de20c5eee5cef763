"""``webperf.capacity``'s measurements: the SLO as checks, each probe an arrival-rate run
judged against it, the search (``capacity.py``) told what each rate did.

    checks = parse_slo("p99<100ms,error_rate<1%")   # checks.py's absolute limits
    found = find(target, setup, plan, checks, start=50, limit=5000)

An SLO is the check grammar's absolute limits (``p99_ms<100``, ``error_rate<0.01``),
with units where a reader expects them (``p99<100ms``, ``p99<0.1s``, ``error_rate<1%``).
A probe also fails when the server completed under ``KEPT`` of the rate offered (its
queue grew: the rate was not sustained, whatever the percentiles of a short run say).
A probe whose generator was saturated, or that completed under ``KEPT`` of the rate
with users idle and its sends late (the generator, not the server, fell behind), is
``generator-bound``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytest_webperf.capacity import Capacity, Decision, Probe, Repetition, search_all, settle
from pytest_webperf.checks import (
    GRAMMAR,
    AbsoluteCheck,
    Check,
    RelativeCheck,
    format_checks,
    parse_check,
)
from pytest_webperf.errors import OptionError
from pytest_webperf.measure import HttpRequests, Label, run_repetition
from pytest_webperf.metrics import BY_SPELLING, METRICS, Metric
from pytest_webperf.models import RunResult
from pytest_webperf.progress import Progress
from pytest_webperf.runplan import MonitorFactory, RunPlan, no_monitor
from pytest_webperf.targets.base import Target
from pytest_webperf.workload import Workload

KEPT = 0.97  # a probe completing less than this share of its offered rate did not sustain it
# a figure this far (relative) from its limit decides with one repetition (the rate
# completed: a fifth of it, 10 % short of the rate offered)
CLEAR = 0.5
MOST_REPETITIONS = 3
# sends this late (p99) with a connection free, and the rate not sent: the generator fell
# behind (the schedule's lag counts from when a request was due to when it was sent)
LATE_MS = 100.0
MAX_USERS = 2000
DEFAULT_SLO = "p99<100ms,error_rate<1%"
SLO_GRAMMAR = (
    "an SLO is a comma-separated list of limits, METRIC<V / <= / > / >= "
    "(e.g. 'p99<100ms,error_rate<1%'; latency in ms, s or us, a rate in % or as a fraction)"
)
_PART = re.compile(
    r"\s*(?P<head>[A-Za-z_][A-Za-z0-9_]*\s*(?:\[[^\[\],]*\]\s*)?(?:<=|>=|<|>))\s*"
    r"(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>ms|us|µs|s|%)?\s*"
)
_TO_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001, "µs": 0.001}


def parse_slo(text: str) -> tuple[AbsoluteCheck, ...]:
    """``slo=``'s text as absolute checks (``checks.parse_check`` reads each, after its
    unit is turned into the metric's), or an ``OptionError`` naming ``slo=``."""
    if not isinstance(text, str) or not text.strip():
        raise OptionError(f"slo={text!r}: {SLO_GRAMMAR}")
    found: list[AbsoluteCheck] = []
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise OptionError(f"slo={text!r}: bad limit {part.strip()!r}; {SLO_GRAMMAR}")
        head, value, unit = match["head"], float(match["num"]), match["unit"]
        name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", head)
        metric = BY_SPELLING.get(name[0].lower()) if name else None
        if metric is None:
            raise OptionError(f"slo={text!r}: unknown metric in {part.strip()!r}; {GRAMMAR}")
        if unit in _TO_MS and metric.unit == "ms":
            value *= _TO_MS[unit]
        elif unit == "%" and metric.combine == "rate":
            value /= 100
        elif unit is not None:
            raise OptionError(
                f"slo={text!r}: {part.strip()!r}: {metric.name} is not in {unit} "
                f"({metric.unit or 'a plain number'}); {SLO_GRAMMAR}"
            )
        try:
            check = parse_check(f"{head}{value!r}")
        except OptionError as exc:
            raise OptionError(f"slo={text!r}: {exc}") from None
        if not isinstance(check, AbsoluteCheck):
            raise OptionError(f"slo={text!r}: {part.strip()!r} is not a limit; {SLO_GRAMMAR}")
        found.append(check)
    return tuple(found)


def _metric(check: AbsoluteCheck) -> Metric:
    metric = METRICS[check.metric]
    return metric if check.endpoint is None else metric.for_endpoint(check.endpoint)


def value_of(check: AbsoluteCheck, run: RunResult) -> float | None:
    """The figure ``check`` limits, read from one repetition (a rate per request)."""
    metric = _metric(check)
    value = metric.per_run(run)
    if value is None or metric.combine != "rate":
        return value
    exposure = metric.exposure(run)
    return value / exposure if exposure > 0 else None


def judge(run: RunResult, checks: Sequence[AbsoluteCheck], offered: float) -> Repetition:
    """One repetition at ``offered`` req/s against the SLO."""
    achieved = run.rps
    users_idle = run.users_peak is not None and run.users_peak < run.concurrency
    late = run.schedule_lag.p99_ms if run.schedule_lag is not None else 0.0
    if run.generator_bound:
        return Repetition("generator-bound", True, ("the generator's CPU was saturated",))
    if achieved < KEPT * offered and users_idle and late >= LATE_MS:
        return Repetition(
            "generator-bound",
            True,
            (
                f"{achieved:,.0f} of {offered:,.0f} req/s sent, p99 of sends {late:,.0f} ms "
                f"late with users idle ({run.users_peak} of {run.concurrency} busy at most)",
            ),
        )
    broken: list[str] = []
    far_in, far_out = True, False  # every figure far inside its limit; one far beyond
    if achieved < KEPT * offered:
        broken.append(f"completed {achieved:,.0f} of the {offered:,.0f} req/s offered")
        far_out = achieved < (1 - CLEAR / 5) * offered
    for check in checks:
        value = value_of(check, run)
        if value is None:
            broken.append(f"{check}: not measured")
            far_in = False
            continue
        limit = check.limit
        far = abs(value - limit) > CLEAR * limit if limit > 0 else value != limit
        if check.holds(value):
            far_in = far_in and far
        else:
            broken.append(f"{check} broken: {value:,.4g}")
            far_out = far_out or far
    if broken:
        return Repetition("fail", far_out, tuple(broken))
    return Repetition("pass", far_in, ())


@dataclass(frozen=True)
class Search:
    """How a search probes: where it starts, where it stops, how fine it ends."""

    start: float = 50.0
    limit: float = 20000.0
    factor: float = 2.0
    tolerance: float = 0.05
    max_probes: int = 24


def users_for(rate: float, checks: Sequence[AbsoluteCheck], floor: int) -> int:
    """The users (connections) a rate may need: twice Little's law at the SLO's latency
    limit (a second when it sets none), at least ``floor``, at most ``MAX_USERS``."""
    latency = [c.limit for c in checks if METRICS[c.metric].unit == "ms" and c.op in "<="]
    seconds = max(latency) / 1000 if latency else 1.0
    return max(floor, min(MAX_USERS, math.ceil(2 * rate * seconds)))


@dataclass(frozen=True)
class Found:
    """One side's search: its answer, and the repetitions of the probe at its rate (the
    highest that met the SLO; else the last probed), the runs a report shows."""

    capacity: Capacity
    runs: tuple[RunResult, ...]


def find(
    targets: Sequence[tuple[Target, str]],
    workload: Workload,
    plan: RunPlan,
    checks: Sequence[AbsoluteCheck],
    *,
    user_class: str,
    how: Search = Search(),
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
) -> list[Found]:
    """Search each target's capacity (see ``capacity.search``; several, as the sides of
    an A/B run, probe by probe in turn), ``(target, side)`` each, with ``workload``
    offered at each rate (``plan``'s duration, warm-up and generator processes)."""
    label = label or Label()
    runs: list[dict[float, list[RunResult]]] = [{} for _ in targets]

    def prober(index: int) -> Callable[[float], Probe]:
        target, side = targets[index]

        def probe(rate: float) -> Probe:
            users = users_for(rate, checks, plan.concurrency)
            kind = HttpRequests(replace(workload, arrival_rate=rate), user_class=user_class)
            probe_plan = replace(plan, concurrency=users, repeat=1)
            named = replace(
                label,
                name=f"{label.name} at {rate:,.0f}/s",
                side=side,
                repetitions=MOST_REPETITIONS,
            )
            done: list[RunResult] = runs[index].setdefault(rate, [])
            judged: list[Repetition] = []
            decision = None
            while decision is None:
                run = run_repetition(
                    target,
                    kind,
                    probe_plan,
                    len(done) + 1,
                    monitor_factory=monitor_factory,
                    progress=progress,
                    label=named,
                    before=done,
                )
                done.append(run)
                judged.append(judge(run, checks, rate))
                decision = settle(judged, MOST_REPETITIONS)
            return probe_of(rate, decision, done, judged)

        return probe

    found = search_all(
        [prober(i) for i in range(len(targets))],
        start=how.start,
        limit=how.limit,
        factor=how.factor,
        tolerance=how.tolerance,
        max_probes=how.max_probes,
        slo=format_checks(checks),
    )
    return [
        Found(f, tuple(r.get(f.rate if f.rate is not None else f.probes[-1].rate, ())))
        for f, r in zip(found, runs, strict=True)
    ]


def probe_of(
    rate: float, decision: Decision, runs: Sequence[RunResult], judged: Sequence[Repetition]
) -> Probe:
    """A probe's summary from its repetitions."""
    done = [r for r in runs if r.requests]
    reasons = tuple(dict.fromkeys(x for j in judged if j.decision == decision for x in j.reasons))
    return Probe(
        rate=rate,
        decision=decision,
        achieved=sum(r.rps for r in runs) / len(runs),
        p50_ms=sum(r.latency.p50_ms for r in done) / len(done) if done else None,
        p99_ms=sum(r.latency.p99_ms for r in done) / len(done) if done else None,
        error_rate=sum(r.errors for r in runs) / max(1, sum(r.requests for r in runs)),
        repetitions=len(runs),
        reasons=reasons,
    )


def search_of(start: float, limit: float, tolerance: float) -> Search:
    """``webperf.capacity``'s search arguments, checked: one line naming the bad one."""
    for name, value in (("start", start), ("limit", limit), ("tolerance", tolerance)):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise OptionError(f"webperf.capacity({name}={value!r}): {name} is a number > 0")
    if start > limit:
        raise OptionError(
            f"webperf.capacity(start={start!r}, limit={limit!r}): start is at most the limit"
        )
    if tolerance >= 1:
        raise OptionError(
            f"webperf.capacity(tolerance={tolerance!r}): a fraction under 1 (0.05: 5 %)"
        )
    return Search(start=float(start), limit=float(limit), tolerance=float(tolerance))


DEFAULT_GATE = (RelativeCheck("capacity", 5.0),)


def gate_checks(configured: Sequence[Check]) -> tuple[Check, ...]:
    """What a capacity search is judged by: the run's checks on ``capacity``, else
    ``capacity:5%`` (its other checks read repetitions at one rate, which a search does
    not have)."""
    return tuple(c for c in configured if c.metric == "capacity") or DEFAULT_GATE
