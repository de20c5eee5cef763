"""One measurement: repetitions of a swarm against a target, resources sampled alongside."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from pytest_webperf.models import GeneratorSample, Latency, ResourceSample, RunResult
from pytest_webperf.sampler import (
    RunMonitor,
    foreign_cpu_percent,
    generator_bound,
    machine_busy_seconds,
    own_tree_seconds,
)
from pytest_webperf.swarm.runner import Event, SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target


class Monitor(Protocol):
    """Samples the target (and the generator) while a swarm runs."""

    def watch_generator(self, pid: int) -> None: ...

    def mark_start(self) -> None: ...

    def resource_samples(self) -> list[ResourceSample]: ...

    def generator_samples(self) -> list[GeneratorSample]: ...

    def server_cpu_seconds(self) -> float | None: ...

    def mark_end(self) -> None: ...

    @property
    def errors(self) -> list[str]: ...


MonitorFactory = Callable[[Target], AbstractContextManager[Monitor | None]]


def no_monitor(target: Target) -> AbstractContextManager[Monitor | None]:
    return nullcontext(None)


def sampling_monitor(target: Target) -> AbstractContextManager[Monitor | None]:
    """The target's process trees and cgroups, and the generator, every second."""
    return RunMonitor.for_target(target)


@dataclass(frozen=True)
class RunPlan:
    """How to run each repetition."""

    concurrency: int
    duration_s: float
    warmup_s: float
    repeat: int
    user_class: str = "fast"
    timeout_s: float = 10.0
    workers: int = 1
    spawn_rate: float = 0.0
    server_cores: float | None = None  # the target's CPU limit, for the generator-bound rule


def run_result(
    outcome: SwarmOutcome,
    repetition: int,
    concurrency: int,
    monitor: Monitor | None,
    *,
    workers: int = 1,
    server_cores: float | None = None,
    other_cpu_s: float | None = None,
) -> RunResult:
    total = outcome.total
    resources = tuple(monitor.resource_samples()) if monitor else ()
    generator = tuple(monitor.generator_samples()) if monitor else ()
    bound = generator_bound(generator, resources, workers, server_cores=server_cores)
    notes = list(outcome.notes)
    if monitor is not None:
        notes += [f"sampler: {error}" for error in dict.fromkeys(monitor.errors)]
    if bound:
        notes.append(
            "generator-bound: the load generator's CPU was saturated, the server's was not"
        )
    server_cpu = monitor.server_cpu_seconds() if monitor else None
    foreign = (
        None
        if other_cpu_s is None
        else foreign_cpu_percent(other_cpu_s, server_cpu, outcome.duration_s)
    )
    return RunResult(
        repetition=repetition,
        concurrency=concurrency,
        duration_s=outcome.duration_s,
        requests=total.requests,
        errors=total.errors,
        timeouts=outcome.timeouts,
        connect_errors=outcome.connect_errors,
        bytes=total.bytes,
        latency=Latency.of(total.histogram),
        series=tuple(outcome.series),
        histogram=total.histogram,
        resources=resources,
        generator=generator,
        error_kinds=dict(total.error_kinds),
        server_cpu_seconds=server_cpu,
        generator_bound=bound,
        server_cores=server_cores or float(os.cpu_count() or 1),
        generator_processes=tuple(g.to_dict() for g in outcome.generators),
        foreign_cpu_percent=foreign,
        notes=tuple(notes),
    )


class MachineClock:
    """CPU seconds the rest of the machine (not this pytest process tree: not the
    generator, not the observer) used over the measured phase, from the swarm's events."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None

    @staticmethod
    def _other() -> float:
        return machine_busy_seconds() - own_tree_seconds()

    def on_event(self, event: Event) -> None:
        if event["type"] == "measure-start":
            self.start = self._other()
        elif event["type"] == "done":
            self.end = self._other()

    @property
    def other_seconds(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start


def events_to(monitor: Monitor | None, clock: MachineClock) -> Callable[[Event], None]:
    """What the swarm's events tell the monitor (generator pid, measured phase) and clock."""

    def on_event(event: Event) -> None:
        clock.on_event(event)
        if monitor is None:
            return
        if event["type"] == "started":
            monitor.watch_generator(int(event["pid"]))
        elif event["type"] == "measure-start":
            monitor.mark_start()
        elif event["type"] == "done":
            # the server's CPU window is the requests' window: users still stopping
            # after this (a second at 10,000 users) would cost CPU for uncounted requests
            monitor.mark_end()

    return on_event


def run_repetitions(
    target: Target, spec: SwarmSpec, plan: RunPlan, monitor_factory: MonitorFactory = no_monitor
) -> list[RunResult]:
    """Every repetition against a live target; raises TargetError if it dies mid-run."""
    results = []
    for repetition in range(1, plan.repeat + 1):
        clock = MachineClock()
        with monitor_factory(target) as monitor:
            outcome = run_swarm(spec, events_to(monitor, clock))
        target.check_alive()
        results.append(
            run_result(
                outcome,
                repetition,
                plan.concurrency,
                monitor,
                workers=plan.workers,
                server_cores=plan.server_cores,
                other_cpu_s=clock.other_seconds,
            )
        )
    return results
