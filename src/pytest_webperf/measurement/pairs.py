"""The A/B gate: the change (B, the working tree) against its base (A, a git ref),
measured interleaved in the same run.

Why: on a CI runner every job is a new machine, and on one machine stored baselines
drift 5-8 % within minutes, so no stored number can judge a change there. Measuring
both sides in the same job, alternating, lets drift and noisy neighbours hit both alike
(randomized multiple interleaved trials, Abedi & Brecht, ICPE 2017; duet benchmarking,
Bulej et al., 2020).

How: both targets are up for the whole test and get the same placement. Pairs run in
balanced blocks, A B, B A, A B, ... so a linear drift cancels. Both sides are started
afresh every ``restart_every`` pairs, so each side averages over several process
instances (two identical copies of a server differ by several per cent for as long as
they live: memory layout, hash seed, ASLR). ``--webperf-repeat`` is the minimum number
of pairs; the run looks at the data at N, 2N, 4N, ... pairs and stops as soon as every
check is decided, or when the next pair would overrun the budget (which is a last
look). Look k may fail a check only at level alpha / 2**k (``decide.evaluate``), so all
looks together keep the false-alarm rate at alpha; looking at doubling counts keeps the
number of looks, and so the price in detectable change, small.

With ``plan.profile`` (``--webperf-profile``), both sides of every pair are profiled
alike over their measured phase (``profiler``), and the pairs' profiles are diffed per
function per request (``stacks.diff``): ``Pairs.profile``.

This module is a layer above ``loop.run_repetition``: the loop is the same for both
sides and for HTTP and MQTT.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pytest_webperf.measurement.loop import Label, LoadKind, TargetDied, died, run_repetition
from pytest_webperf.measurement.plan import Monitor, MonitorFactory, RunPlan, no_monitor
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.progress import NoProgress, Progress
from pytest_webperf.models.samples import GeneratorSample, ResourceSample
from pytest_webperf.profiling.capture import Capture, Recording, problem
from pytest_webperf.profiling.stacks import Sample, diff, merge, write_folded
from pytest_webperf.swarm.stamp import CpuProbe
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget


@dataclass(frozen=True)
class PairBudget:
    """How many pairs an A/B measurement runs: at least ``min_pairs``, more while a check
    is undecided and ``budget_s`` allows, both sides restarted every ``restart_every``."""

    min_pairs: int
    budget_s: float  # the test's measuring time beyond which no pair is added
    restart_every: int = 1  # pairs per instance; 0: never restarted


@dataclass
class Pairs:
    """What an A/B measurement ran, pair by pair."""

    base: list[RunResult] = field(default_factory=list)
    change: list[RunResult] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "AB" or "BA" per pair
    looks: int = 0
    stopped: str = ""  # why no more pairs were added
    # with profiling: each repetition's capture (or why there is none), per side
    captures: dict[str, list[Capture | str]] = field(default_factory=lambda: {"A": [], "B": []})
    profile: dict[str, Any] | None = None  # the differential profile (JSON), or why none

    @property
    def instances(self) -> list[int]:
        """Which process instances each finished pair ran on (both sides restart
        together, so the change's runs say it)."""
        return [run.instance or 0 for run in self.change[: len(self.order)]]


# Whether every check is decided, given the pairs so far and the number of this look.
Settled = Callable[[Pairs], bool]


def order_of(index: int) -> str:
    """A B, B A, A B, ...: balanced blocks of two pairs, so a linear drift cancels."""
    return "AB" if index % 2 == 0 else "BA"


def run_pairs(
    target: PairedTarget,
    kind: LoadKind,
    plan: RunPlan,
    budget: PairBudget,
    settled: Settled,
    *,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Pairs:
    """Interleaved pairs until every check is decided or the budget is spent (at least
    ``punctuality.min_pairs``). Raises ``loop.TargetDied`` (with the change's runs so far)
    if either side dies."""
    sides = {"A": target.side("A"), "B": target.change}
    for side in sides.values():
        kind.check(side)
        dead = died(side, ())
        if dead is not None:
            raise dead
    label = label or Label()
    pairs = Pairs()
    why = problem() if plan.profile != "off" else None
    profiling = plan.profile == "on" or (plan.profile == "auto" and why is None)
    recordings: list[Recording] = []
    if profiling and why is None:
        monitor_factory = profiling_monitors(monitor_factory, recordings)
    started = clock()
    instance = 0
    next_look = budget.min_pairs
    while True:
        index = len(pairs.order)
        if kind.fresh:  # each round starts its own instances
            instance = index
        elif index and budget.restart_every and index % budget.restart_every == 0:
            target.restart()
            instance += 1
        order = order_of(index)
        for letter in order:
            runs = pairs.base if letter == "A" else pairs.change
            try:
                run = profiled_repetition(
                    recordings,
                    pairs.captures[letter],
                    partial(
                        run_repetition,
                        sides[letter],
                        kind,
                        plan,
                        index + 1,
                        monitor_factory=monitor_factory,
                        progress=progress or NoProgress(),
                        label=Label(label.nodeid, label.name, letter, max(next_look, index + 1)),
                        before=pairs.change,
                    ),
                )
            except TargetDied as exc:  # both sides have one name: say which one died
                which = "the base (A)" if letter == "A" else "the change (B)"
                message = str(exc.args[0]).split("\n--- last lines")[0]
                raise TargetDied(f"{which}: {message}", exc.logs, exc.runs) from None
            runs.append(replace(run, instance=instance))
        pairs.order.append(order)
        done = len(pairs.order)
        if done == next_look:
            pairs.looks += 1
            if settled(pairs):
                pairs.stopped = f"every check decided after {done} pairs"
                pairs.profile = profile_of(pairs, why) if profiling else None
                return pairs
            next_look *= 2
        spent = clock() - started
        if done >= budget.min_pairs and spent + spent / done > budget.budget_s:
            if done != next_look // 2:  # pairs since the last look: the end is a look too
                pairs.looks += 1
            pairs.stopped = (
                f"budget of {budget.budget_s:g}s spent after {done} pairs with checks undecided"
            )
            pairs.profile = profile_of(pairs, why) if profiling else None
            return pairs


# --- profiles -----------------------------------------------------------------------------


class _ProfilingMonitor:
    """The run's monitor, with a profile recorded over the measured phase."""

    def __init__(self, inner: Monitor | None, recording: Recording) -> None:
        self.inner, self.recording = inner, recording

    def watch_generator(self, pid: int) -> None:
        if self.inner is not None:
            self.inner.watch_generator(pid)

    def cpu_probes(self) -> tuple[CpuProbe, ...]:
        return () if self.inner is None else self.inner.cpu_probes()

    def mark_start(self, stamp: Mapping[str, Any] | None = None) -> None:
        if self.inner is not None:
            self.inner.mark_start(stamp)
        self.recording.start()

    def mark_end(self, stamp: Mapping[str, Any] | None = None) -> None:
        self.recording.stop()
        if self.inner is not None:
            self.inner.mark_end(stamp)

    def resource_samples(self) -> list[ResourceSample]:
        return self.inner.resource_samples() if self.inner is not None else []

    def generator_samples(self) -> list[GeneratorSample]:
        return self.inner.generator_samples() if self.inner is not None else []

    def server_cpu_seconds(self) -> float | None:
        return self.inner.server_cpu_seconds() if self.inner is not None else None

    def server_ctx_switches(self) -> int | None:
        return self.inner.server_ctx_switches() if self.inner is not None else None

    @property
    def errors(self) -> list[str]:
        return self.inner.errors if self.inner is not None else []


def profiling_monitors(factory: MonitorFactory, recordings: list[Recording]) -> MonitorFactory:
    """``factory``'s monitors, each recording a profile of the target it watches."""

    @contextmanager
    def monitor(target: Target) -> Iterator[Monitor | None]:
        recording = Recording(dict(target.parts()))
        recordings.append(recording)
        try:
            with factory(target) as inner:
                yield _ProfilingMonitor(inner, recording)
        finally:
            recording.stop()

    return monitor


def profiled_repetition(
    recordings: list[Recording], captures: list[Capture | str], run: Callable[[], RunResult]
) -> RunResult:
    """One repetition, and its profile (if one was recorded) added to ``captures``
    (folding right away: a container's binaries are readable while it lives)."""
    try:
        result = run()
        for recording in recordings:
            captures.append(recording.collect())
        return result
    finally:
        for recording in recordings:
            recording.close()
        recordings.clear()


def profile_of(pairs: Pairs, why: str | None) -> dict[str, Any]:
    """The differential profile of the pairs as the JSON report holds it: the functions
    whose self CPU per request changed (ranked), both sides' stacks (all repetitions
    added up); or ``{"why": ...}`` when there is none."""
    if why is not None:
        return {"why": why}
    done = len(pairs.order)
    sides = {letter: pairs.captures[letter][:done] for letter in "AB"}
    runs = {"A": pairs.base[:done], "B": pairs.change[:done]}
    reasons = [c for letter in "AB" for c in sides[letter] if isinstance(c, str)]
    samples: list[tuple[Sample, Sample]] = []
    notes: list[str] = []
    for index in range(min(len(sides["A"]), len(sides["B"]))):
        a, b = sides["A"][index], sides["B"][index]
        base, change = runs["A"][index], runs["B"][index]
        if isinstance(a, Capture) and isinstance(b, Capture):
            samples.append(
                (
                    Sample(a.stacks, a.period_s, base.requests, base.cpu_per_req_us),
                    Sample(b.stacks, b.period_s, change.requests, change.cpu_per_req_us),
                )
            )
            notes += [*a.notes, *b.notes]
    if not samples:
        return {"why": "; ".join(dict.fromkeys(reasons)) or "no repetition was profiled"}
    result = diff(samples)
    captured = [c for letter in "AB" for c in sides[letter] if isinstance(c, Capture)]
    if len(samples) < done:
        notes.append(f"{done - len(samples)} of {done} pairs not profiled: {reasons[0]}")
    if result.pairs < 2:
        notes.append("one pair: no interval, no function flagged (--webperf-repeat 2 or more)")
    return {
        "tools": sorted({tool for c in captured for tool in c.tools}),
        "pairs": result.pairs,
        "tested": result.tested,
        "confidence": result.confidence,
        "changes": [change.to_dict() for change in result.changes],
        "samples": {
            "A": sum(a.samples for a, _ in samples),
            "B": sum(b.samples for _, b in samples),
        },
        "requests": {
            "A": sum(a.requests for a, _ in samples),
            "B": sum(b.requests for _, b in samples),
        },
        "base_folded": write_folded(merge(*(a.stacks for a, _ in samples))),
        "change_folded": write_folded(merge(*(b.stacks for _, b in samples))),
        "notes": list(dict.fromkeys(notes)),
    }
