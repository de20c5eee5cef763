"""Stages: one target instance loaded at several levels in turn (users in a closed loop,
or arrival rates), each stage measured as a repetition is, so every figure of a
repetition is there per stage.

    stages = parse_stages([("30s", 100), ("30s", 500)])
    runs = run_stages(target, kinds, plan, stages)   # runs[i]: stage i's repetitions

A repetition runs every stage in order against the same instance (never restarted
between stages: what carries over, a JIT's warm-up or a growing heap, shows in the
later stages); the first stage of a repetition has the plan's warm-up, the others
none. Between two stages the load pauses while the next stage's swarm starts (about
a second): each stage is its own swarm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytest_webperf.errors import OptionError
from pytest_webperf.measurement.loop import Label, LoadKind, died, run_repetition
from pytest_webperf.measurement.plan import MonitorFactory, RunPlan, no_monitor
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.progress import Progress
from pytest_webperf.targets.base import Target
from pytest_webperf.values import parse_duration

MAX_STAGES = 50
ACCEPTS = (
    "a list of (duration, level) pairs, e.g. [('30s', 100), ('30s', 500)]: each "
    "duration > 0 ('30s', 2.5), each level the users (an int >= 1) or, with "
    "arrival_rate=True, requests per second (> 0)"
)


@dataclass(frozen=True)
class Stage:
    """One stage: how long it is measured, and its level (users, or a rate per second)."""

    duration_s: float
    level: float

    def label(self, index: int, count: int, arrival: bool) -> str:
        level = f"{self.level:,g}/s" if arrival else f"{self.level:,.0f} users"
        return f"stage {index + 1}/{count}: {level}, {self.duration_s:g}s"


def parse_stages(stages: object, *, arrival: bool) -> tuple[Stage, ...]:
    """``stages=``'s value checked: one line naming ``stages=`` and what it accepts."""
    shown = repr(stages)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    if isinstance(stages, str | bytes) or not isinstance(stages, Sequence) or not stages:
        raise OptionError(f"stages={shown}: {ACCEPTS}")
    if len(stages) > MAX_STAGES:
        raise OptionError(f"stages={shown}: at most {MAX_STAGES} stages, not {len(stages)}")
    parsed = []
    for entry in stages:
        if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or len(entry) != 2:
            raise OptionError(f"stages={shown}: {entry!r} is not a pair; {ACCEPTS}")
        duration, level = entry
        try:
            seconds = parse_duration(duration)
        except (TypeError, ValueError):
            seconds = -1.0
        number = isinstance(level, int | float) and not isinstance(level, bool)
        whole = isinstance(level, int) or arrival
        if not seconds > 0 or not number or not whole or not math.isfinite(level) or level <= 0:
            raise OptionError(f"stages={shown}: bad stage {entry!r}; {ACCEPTS}")
        parsed.append(Stage(seconds, float(level)))
    return tuple(parsed)


def run_stages(
    target: Target,
    kind_of: Callable[[Stage], LoadKind],
    plan: RunPlan,
    stages: Sequence[Stage],
    *,
    arrival: bool,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
) -> list[list[RunResult]]:
    """Each repetition of ``plan``: every stage in order against ``target``, one swarm
    each (``kind_of(stage)`` its load); the results by stage, then by repetition.
    Raises ``loop.TargetDied`` when the target died (its runs: that stage's)."""
    label = label or Label()
    dead = died(target, ())
    if dead is not None:
        raise dead
    runs: list[list[RunResult]] = [[] for _ in stages]
    for repetition in range(1, plan.repeat + 1):
        for index, stage in enumerate(stages):
            users = plan.concurrency if arrival else int(stage.level)
            staged = replace(
                plan,
                concurrency=users,
                duration_s=stage.duration_s,
                warmup_s=plan.warmup_s if index == 0 else 0.0,
            )
            name = f"{label.name} {stage.label(index, len(stages), arrival)}"
            result = run_repetition(
                target,
                kind_of(stage),
                staged,
                repetition,
                monitor_factory=monitor_factory,
                progress=progress,
                label=replace(label, name=name, repetitions=plan.repeat),
                before=runs[index],
            )
            runs[index].append(replace(result, instance=0))
    return runs
