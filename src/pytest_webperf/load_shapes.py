"""``webperf.capacity`` and ``webperf.staged`` for the test's measurer (``measurer.Measurer``):
their arguments made into a workload and a plan, the searches or stages run
(``capacity_probe.py``, ``stages.py``), the results judged and recorded as
measurements of the measurer's test. ``api.py`` keeps only their signatures."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_webperf import arguments, capacity_probe
from pytest_webperf.capacity import Capacity
from pytest_webperf.errors import OptionError
from pytest_webperf.httpworkload import http_name, http_workload
from pytest_webperf.measure import HttpRequests, Label
from pytest_webperf.models import Measurement
from pytest_webperf.stages import Stage, parse_stages, run_stages
from pytest_webperf.swarm.hotloop import resolve_user, user_for_url
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.workload import Request, Workload

if TYPE_CHECKING:
    from pytest_webperf.measurer import Measurer


def capacity(
    measurer: Measurer,
    target: Target,
    path: str | None,
    *,
    mix: Sequence[Request] | None,
    slo: str,
    start: float,
    limit: float,
    tolerance: float,
    duration: str | float,
    warmup: str | float,
    user: str | None,
    name: str | None,
) -> Capacity:
    """``webperf.capacity``: the search (an A/B run: one on each side, interleaved),
    recorded as a measurement judged by the run's ``capacity`` checks."""
    checks = capacity_probe.parse_slo(slo)
    how = capacity_probe.search_of(start, limit, tolerance)
    user_class = user_for_url(resolve_user(user or measurer.config.user), target.url)
    plan = measurer.plan(target, concurrency=None, duration=duration, warmup=warmup, repeat=1)
    workload = http_workload(
        path,
        method=None,
        body=None,
        headers=None,
        user_class=user_class,
        workers=measurer.config.workers + measurer.config.remote_workers,
        users=plan.concurrency,
        arrival_rate=start,
        mix=mix,
    )
    unpaced = dataclasses.replace(workload, arrival_rate=0.0)
    label = Label(measurer.nodeid, name or f"capacity of {http_name(unpaced)}")
    sides = [(target, "")]
    described = None
    if isinstance(target, PairedTarget):  # A/B: a search on each side, interleaved
        described = measurer.described(target)
        if target.base is None and not target.changed:  # the same as at the base
            measurer.skip_unchanged(
                target,
                Measurement(
                    nodeid=measurer.nodeid,
                    name=label.name,
                    server=target.name,
                    concurrency=plan.concurrency,
                    workload=unpaced,
                    runs=(),
                    target=target.describe(),
                    generator=user_class,
                ),
            )
        sides = [(target.change, "B")] + ([(target.base, "A")] if target.base else [])
    found = capacity_probe.find(
        sides,
        workload,
        plan,
        checks,
        user_class=user_class,
        how=how,
        monitor_factory=measurer._monitor_factory,
        progress=measurer._progress,
        label=label,
    )
    change = dataclasses.replace(found[0].capacity, name=label.name, server=target.name)
    base = found[1] if len(found) > 1 else None
    measurement = Measurement(
        nodeid=measurer.nodeid,
        name=label.name,
        server=target.name,
        concurrency=found[0].runs[0].concurrency if found[0].runs else plan.concurrency,
        workload=unpaced,
        runs=found[0].runs,
        target=target.describe(),
        generator=user_class,
        capacity=change,
        base_capacity=base.capacity if base else None,
        base_runs=base.runs if base else (),
        against=described,  # A/B: new since the base (no base_runs) or against it
    )
    gate = capacity_probe.gate_checks(measurer.config.compare_fail or ())
    judged = measurer._judged(measurement, gate)
    if judged.verdict is not None:  # what was found, said under the table
        found_at = (f"B: {change}", f"A: {base.capacity}") if base else (str(change),)
        verdict = dataclasses.replace(judged.verdict, notes=(*found_at, *judged.verdict.notes))
        judged = dataclasses.replace(judged, verdict=verdict)
    measurer.measurements.append(judged)
    return change


def staged(
    measurer: Measurer,
    target: Target,
    path: str | None,
    *,
    stages: Sequence[tuple[str | float, float]],
    arrival_rate: bool,
    mix: Sequence[Request] | None,
    concurrency: int | None,
    warmup: str | float | None,
    repeat: int | None,
    user: str | None,
    name: str | None,
) -> tuple[Measurement, ...]:
    """``webperf.staged``: every stage on one instance, a judged measurement each."""
    given = {"concurrency": concurrency, "warmup": warmup, "repeat": repeat}
    arguments.check("http", {**given, "user": user, "name": name})
    parsed = parse_stages(stages, arrival=arrival_rate)
    if isinstance(target, PairedTarget):
        raise OptionError("webperf.staged(...) is not run A/B yet: drop --webperf-against")
    user_class = user_for_url(resolve_user(user or measurer.config.user), target.url)
    plan = measurer.plan(target, concurrency=concurrency, duration=1, warmup=warmup, repeat=repeat)
    workload = http_workload(
        path,
        method=None,
        body=None,
        headers=None,
        user_class=user_class,
        workers=measurer.config.workers + measurer.config.remote_workers,
        users=plan.concurrency,
        arrival_rate=parsed[0].level if arrival_rate else None,
        mix=mix,
    )

    def load(stage: Stage) -> Workload:
        return dataclasses.replace(workload, arrival_rate=stage.level if arrival_rate else 0)

    label = Label(measurer.nodeid, name or http_name(dataclasses.replace(workload, arrival_rate=0)))
    runs = run_stages(
        target,
        lambda stage: HttpRequests(load(stage), user_class=user_class),
        plan,
        parsed,
        arrival=arrival_rate,
        monitor_factory=measurer._monitor_factory,
        progress=measurer._progress,
        label=label,
    )
    measured = []
    for index, (stage, stage_runs) in enumerate(zip(parsed, runs, strict=True)):
        measurement = Measurement(
            nodeid=measurer.nodeid,
            name=f"{label.name} {stage.label(index, len(parsed), arrival_rate)}",
            server=target.name,
            concurrency=stage_runs[0].concurrency,
            workload=load(stage),
            runs=tuple(stage_runs),
            target=target.describe(),
            generator=user_class,
        )
        measured.append(measurer._judged(measurement, None))
    measurer.measurements.extend(measured)
    return tuple(measured)
